"""memory_engine.exceptions is the complete list of error codes: one class per code, each
documented in docs/operations.md with the status its class answers, and no raise site
choosing a code or a status of its own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from memory_engine.api.exceptions import exception_handler
from memory_engine.exceptions import MemoryEngineError, error_classes

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "memory_engine"
OPERATIONS = ROOT / "docs" / "operations.md"

#: Raise sites allowed to choose a code for now (none left).
TRANSITIONAL: set[str] = set()

CODES = {cls.code: cls for cls in error_classes()}


def documented_rows() -> list[tuple[int, list[str]]]:
    """``(status, codes)`` of each row of the error-code table in docs/operations.md."""
    rows = []
    for line in OPERATIONS.read_text().splitlines():
        match = re.match(r"\| (\d{3}) \| ([^|]+) \|", line)
        if match:
            rows.append((int(match.group(1)), re.findall(r"`([A-Z][A-Z0-9_]*)`", match.group(2))))
    return rows


def test_every_code_is_documented() -> None:
    text = OPERATIONS.read_text()
    missing = sorted(code for code in CODES if f"`{code}`" not in text)
    assert not missing, f"docs/operations.md does not list: {', '.join(missing)}"


def test_the_table_gives_each_code_the_status_of_its_class() -> None:
    rows = documented_rows()
    assert len(rows) > 30  # the table was found
    wrong = [f"{code}: documented {status}, answered {CODES[code].status_code}"
             for status, codes in rows for code in codes if code in CODES and CODES[code].status_code != status]
    unknown = [code for _, codes in rows for code in codes if code not in CODES]
    assert not wrong, wrong
    assert not unknown, f"documented but defined by no class in memory_engine.exceptions: {unknown}"


def test_one_class_per_code() -> None:
    own: dict[str, str] = {}
    for cls in error_classes():
        if "code" in vars(cls):
            assert re.fullmatch(r"[A-Z][A-Z0-9]*(_[A-Z0-9]+)*", cls.code), cls
            assert cls.code not in own, f"{cls.__name__} and {own[cls.code]} share {cls.code}"
            own[cls.code] = cls.__name__
    assert len(own) == len(CODES) > 90


def test_codes_and_statuses_are_literals_of_the_classes() -> None:
    """No code is computed (an f-string, a concatenation): each is a plain string on its class."""
    modules = sorted((PACKAGE / "exceptions").glob("*.py"))
    assert len(modules) > 1
    for node in (node for module in modules for node in ast.walk(ast.parse(module.read_text()))):
        if isinstance(node, ast.ClassDef):
            for statement in node.body:
                targets = statement.targets if isinstance(statement, ast.Assign) else (
                    [statement.target] if isinstance(statement, ast.AnnAssign) else [])
                for target in targets:
                    if isinstance(target, ast.Name) and target.id in ("code", "status_code"):
                        assert isinstance(statement.value, ast.Constant), f"{node.name}.{target.id}"


def raise_site_overrides(source: str, name: str) -> list[str]:
    """``code=`` keywords in calls and assignments to ``.code`` / ``.status_code`` in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Call):
            found += [f"{name}:{node.lineno} code=" for keyword in node.keywords if keyword.arg == "code"]
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found += [f"{name}:{node.lineno} .{target.attr} =" for target in targets
                      if isinstance(target, ast.Attribute) and target.attr in ("code", "status_code")]
    return found


def test_no_raise_site_chooses_a_code_or_a_status() -> None:
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        if "migrations" not in path.parts and name not in TRANSITIONAL:
            found += raise_site_overrides(path.read_text(), name)
    assert not found, found


def test_the_scan_finds_overrides() -> None:
    source = "def f(error):\n    error.status_code = 410\n    raise NotFound('gone', code='GONE')\n"
    assert sorted(raise_site_overrides(source, "sample.py")) == ["sample.py:2 .status_code =", "sample.py:3 code="]


@pytest.mark.parametrize("cls", error_classes(), ids=lambda cls: cls.__name__)
def test_the_api_answers_each_class_with_its_code_and_status(cls: type[MemoryEngineError]) -> None:
    response = exception_handler(cls("What to do next.", details={"field": "x"}), {})
    assert response is not None
    assert (response.status_code, response.data) == (
        cls.status_code, {"code": cls.code, "message": "What to do next.", "details": {"field": "x"}})
    assert (response.headers.get("Retry-After") is not None) == (cls.status_code in (429, 503))
