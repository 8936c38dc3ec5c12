"""Every way a test of this suite may be skipped, and why: the skip groups.

A skip is allowed only where the environment cannot run the test (no corpus named, no browser,
no PgBouncer, another database server), never where the code is wrong. tests/conftest.py turns
a skip whose reason belongs to no group below into a failure (a new reason to skip is declared
here, with why), and prints after the run how many tests each group skipped and why.

A group whose tool ``make test`` installs (the browser, PgBouncer) skips only outside CI: under
``CI=true`` a missing tool fails its tests instead (:func:`require`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

import pytest

from .corpus import CORPUS_ENV, SKIP_REASON


@dataclass(frozen=True)
class SkipGroup:
    name: str
    #: why the group's tests do not run here, and how to run them
    why: str
    #: matches the reasons the group's tests give when they skip
    reason: re.Pattern[str]


#: How a missing tool's skip reason starts (require()), followed by the tool's name.
TOOL_MISSING = "not available here:"

SKIP_GROUPS = (
    SkipGroup("corpus", f"need the real-world data set: set {CORPUS_ENV} (CI sets it to ../shared/data)",
              re.compile(re.escape(SKIP_REASON))),
    SkipGroup("corpus PDFs all named", "the manifest check of corpus PDFs no test names: the data set holds none "
                                       "(a PDF added to it is checked there)",
              re.compile(r"every corpus PDF is named by an outcome above")),
    SkipGroup("browser", "the operator console in headless Chromium: `make test` installs chromium as root; "
                         "fails under CI=true", re.compile(re.escape(TOOL_MISSING) + " browser:")),
    SkipGroup("pgbouncer", "the write funnel behind PgBouncer in transaction mode: `make test` installs pgbouncer "
                           "as root; fails under CI=true", re.compile(re.escape(TOOL_MISSING) + " pgbouncer:")),
    SkipGroup("citus", "the schema on a real 3-node Citus cluster: needs the Citus source tarball "
                       "(../shared/citus/citus-14.0.1.tar.gz or MEMORY_ENGINE_CITUS_SOURCE); fails under CI=true",
              re.compile(re.escape(TOOL_MISSING) + " citus:")),
    SkipGroup("pg_textsearch >= 1.3", "the rebuild of pg_textsearch 1.0's statistics after a restart: a server "
                                      "with 1.3 or later keeps them (the embedded server has 1.0)",
              re.compile(r"pg_textsearch >= 1\.3 keeps its statistics")),
    SkipGroup("DATABASE_URL", "the embedded server's own tests: the suite runs on DATABASE_URL",
              re.compile(r"the suite runs on DATABASE_URL")),
)


def skip_group(reason: str) -> SkipGroup | None:
    """The group a skip reason belongs to, None when it belongs to none (an undeclared skip)."""
    return next((group for group in SKIP_GROUPS if group.reason.search(reason)), None)


def in_ci() -> bool:
    """True when the environment says this is a CI run (``CI=true``, as CI services set it)."""
    return os.environ.get("CI", "").strip().lower() in {"true", "1", "yes"}


def require(tool: str, missing: str) -> None:
    """Skip the test when ``tool`` (a group's name) is missing (``missing`` says what is and how to
    get it); under CI, where the tool must be there, fail it instead. Nothing when ``missing`` is
    empty."""
    if not missing:
        return
    if in_ci():
        pytest.fail(f"CI=true and the test cannot run: {missing}", pytrace=False)
    pytest.skip(f"{TOOL_MISSING} {tool}: {missing}")
