"""The key table of docs/settings.md, generated from the one declaration of the settings
(``memory_engine.conf.SETTINGS``: each key's default, type and meaning).

    python -m tests.settings_table          # rewrite the table in docs/settings.md (`make docs`)
    python -m tests.settings_table --check  # exit 1 when the table differs from the declaration

tests/test_settings.py fails when the two differ, so a setting cannot be added, changed or
removed without its row.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SETTINGS_DOC = ROOT / "docs" / "settings.md"
BEGIN = "<!-- settings: generated from memory_engine.conf.SETTINGS by `make docs`; edit the declaration -->"
END = "<!-- /settings -->"


def render(settings: Iterable[object]) -> str:
    """The markdown table of ``settings`` (``memory_engine.conf.Setting`` rows), in their order."""
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    rows += [f"| `{s.name}` | {s.kind} | {s.shown} | {s.meaning} |" for s in settings]  # type: ignore[attr-defined]
    return "\n".join(rows)


def rewritten(document: str, table: str) -> str:
    """``document`` with the text between the markers replaced by ``table``."""
    head, rest = document.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{table}\n{END}{tail}"


def main(argv: list[str]) -> int:
    from memory_engine.conf import SETTINGS  # conf reads no Django setting at import

    document = SETTINGS_DOC.read_text(encoding="utf-8")
    updated = rewritten(document, render(SETTINGS))
    if "--check" in argv:
        if updated != document:
            print("docs/settings.md differs from memory_engine.conf.SETTINGS: run `make docs`", file=sys.stderr)
            return 1
        return 0
    SETTINGS_DOC.write_text(updated, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
