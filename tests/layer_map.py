"""The layer table of docs/decisions.md ("Layer map"), generated from the import-linter layers
contract in pyproject.toml: its layers, bottom first, each with the comment written above it.

    python -m tests.layer_map          # rewrite the table in docs/decisions.md (`make docs`)
    python -m tests.layer_map --check  # exit 1 when the table differs from the contract

tests/test_layer_map.py fails when the two differ, so the table cannot drift from the contract.
"""

from __future__ import annotations

import re
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = ROOT / "pyproject.toml"
DECISIONS = ROOT / "docs" / "decisions.md"
BEGIN = "<!-- layer map: generated from pyproject.toml's layers contract by `make docs`; edit the contract -->"
END = "<!-- /layer map -->"


@dataclass
class Layer:
    modules: list[str]
    #: ``|``: the modules do not import each other; ``:``: they may
    independent: bool
    about: str


def layers_contract(text: str) -> list[Layer]:
    """The layers contract's layers, top first, each with its comment (the ``#`` lines above it)."""
    contracts = tomllib.loads(text)["tool"]["importlinter"]["contracts"]
    declared = next(contract["layers"] for contract in contracts if contract["type"] == "layers")
    block = re.search(r'^type = "layers"$.*?^layers = \[\n(.*?)^\]', text, re.MULTILINE | re.DOTALL)
    assert block is not None, "pyproject.toml has no layers contract with a `layers = [...]` list"
    layers: list[Layer] = []
    comment: list[str] = []
    for line in block.group(1).splitlines():
        line = line.strip()
        if line.startswith("#"):
            comment.append(line.lstrip("#").strip())
        elif line.startswith('"'):
            value = line.rstrip(",").strip('"')
            separator = ":" if ":" in value else "|"
            layers.append(Layer([m.strip() for m in value.split(separator)], separator == "|", " ".join(comment)))
            comment = []
    assert [" | ".join(layer.modules) if layer.independent else " : ".join(layer.modules) for layer in layers] \
        == declared, "the layers read from pyproject.toml's text differ from its TOML"
    return layers


def render(layers: list[Layer]) -> str:
    """The markdown table: bottom layer first (each layer imports only the rows above it)."""
    rows = ["| # | modules | what they hold |", "|---|---|---|"]
    for number, layer in enumerate(reversed(layers), start=1):
        modules = ", ".join(f"`{module}`" for module in layer.modules)
        if len(layer.modules) > 1:
            modules += " (independent)" if layer.independent else " (may import each other)"
        rows.append(f"| {number} | {modules} | {layer.about} |")
    return "\n".join(rows)


def rewritten(document: str, table: str) -> str:
    """``document`` with the text between its markers replaced by ``table``."""
    start, end = document.index(BEGIN) + len(BEGIN), document.index(END)
    return f"{document[:start]}\n{table}\n{document[end:]}"


def main(argv: list[str]) -> int:
    document = DECISIONS.read_text(encoding="utf-8")
    expected = rewritten(document, render(layers_contract(PYPROJECT.read_text(encoding="utf-8"))))
    if "--check" in argv:
        if expected != document:
            print("docs/decisions.md's layer table differs from pyproject.toml: run `make docs`", file=sys.stderr)
            return 1
        return 0
    DECISIONS.write_text(expected, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
