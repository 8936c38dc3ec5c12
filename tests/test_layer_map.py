"""docs/decisions.md's layer table is the layers contract of pyproject.toml (tests/layer_map.py)."""

from __future__ import annotations

from tests.layer_map import BEGIN, DECISIONS, END, PYPROJECT, layers_contract, render, rewritten


def test_the_layer_table_is_generated_from_the_contract() -> None:
    document = DECISIONS.read_text(encoding="utf-8")
    table = render(layers_contract(PYPROJECT.read_text(encoding="utf-8")))
    assert rewritten(document, table) == document, "the layer table differs from pyproject.toml: run `make docs`"


def test_every_layer_says_what_it_holds() -> None:
    layers = layers_contract(PYPROJECT.read_text(encoding="utf-8"))
    assert all(layer.about for layer in layers), [layer.modules for layer in layers if not layer.about]


def test_a_changed_contract_changes_the_table() -> None:
    text = PYPROJECT.read_text(encoding="utf-8")
    changed = text.replace('    "tasks",\n', '    # moved\n    "tasks | webhooks",\n', 1).replace(
        '    "webhooks",\n', "", 1)
    document = DECISIONS.read_text(encoding="utf-8")
    assert rewritten(document, render(layers_contract(changed))) != document
    assert document.count(BEGIN) == document.count(END) == 1
