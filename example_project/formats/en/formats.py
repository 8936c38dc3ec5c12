"""The example project's English formats: timestamps as "2026-12-06 03:48" in the admin's columns
and read-only fields (Django's own "Dec. 6, 2026, 3:48 a.m." ends in a period that a sentence
doubles). A host project opts in the same way, with FORMAT_MODULE_PATH."""

DATETIME_FORMAT = "Y-m-d H:i"
SHORT_DATETIME_FORMAT = "Y-m-d H:i"
DATE_FORMAT = "Y-m-d"
SHORT_DATE_FORMAT = "Y-m-d"
TIME_FORMAT = "H:i"
