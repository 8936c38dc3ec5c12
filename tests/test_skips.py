"""The skip groups (tests/skips.py): each group recognises the reasons its tests give, and a
reason no group declares is no group's (tests/conftest.py then fails the test)."""

from __future__ import annotations

import pytest

from tests.admin.test_browser import browser_missing
from tests.corpus import SKIP_REASON
from tests.skips import SKIP_GROUPS, require, skip_group
from tests.test_extraction import ALL_CORPUS_PDFS_NAMED


def skip_reason_of(tool: str, missing: str) -> str:
    with pytest.raises(pytest.skip.Exception) as caught:
        require(tool, missing)
    return str(caught.value)


@pytest.mark.parametrize("reason, group", [
    (SKIP_REASON, "corpus"),
    (ALL_CORPUS_PDFS_NAMED, "corpus PDFs all named"),
    ("browser", "browser"),
    ("pgbouncer", "pgbouncer"),
    ("citus", "citus"),
    ("pg_textsearch >= 1.3 keeps its statistics: nothing is ever stale", "pg_textsearch >= 1.3"),
    ("the suite runs on DATABASE_URL, not the embedded server", "DATABASE_URL"),
])
def test_each_group_recognises_its_reasons(monkeypatch: pytest.MonkeyPatch, reason: str, group: str) -> None:
    monkeypatch.delenv("CI", raising=False)
    if reason in ("browser", "pgbouncer", "citus"):
        reason = skip_reason_of(reason, browser_missing() or "/usr/bin/chromium is missing")
    found = skip_group(reason)
    assert found is not None and found.name == group


def test_a_reason_no_group_declares_belongs_to_none() -> None:
    assert skip_group("the memory write API does not take `kind` on this branch") is None
    assert skip_group("not available here: a tool of its own: missing") is None
    assert len({group.name for group in SKIP_GROUPS}) == len(SKIP_GROUPS)


def test_under_ci_a_missing_tool_fails(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true and the test cannot run: pgbouncer is missing"):
        require("pgbouncer", "pgbouncer is missing")
    require("pgbouncer", "")  # nothing missing: nothing happens
