"""manage.py memory_engine_import: JSON Lines and CSV through the batch write door, file order
kept, refused lines named with the reason and nothing else lost, progress and a summary."""

from __future__ import annotations

import json
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from memory_engine.models import Memory, MemoryAssertion
from tests.factories import MemoryStoreFactory

pytestmark = [pytest.mark.django_db, pytest.mark.usefixtures("hashing_embedder")]


def run(*args: Any) -> tuple[str, int]:
    out = StringIO()
    try:
        call_command("memory_engine_import", *map(str, args), stdout=out, stderr=StringIO())
    except SystemExit as exit_:
        return out.getvalue(), int(exit_.code or 0)
    return out.getvalue(), 0


def test_jsonl_records_are_written_in_order_and_a_bad_line_is_named(tmp_path: Path, project: Any) -> None:
    store = MemoryStoreFactory(project=project)
    lines = [
        {"content": "The customer ordered 40 crates in May.", "tags": {"source": "crm"}},
        {"content": "The customer ordered 40 crates in May."},
        {"content": "Deliveries go to the north gate.", "kind": "fact", "provenance": "stated"},
        {"content": "Billing is quarterly.", "colour": "blue"},
        {"content": ""},
    ]
    path = tmp_path / "export.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\nnot json\n", encoding="utf-8")
    out, status = run(path, "--store", store.pk, "--batch-size", 2)
    assert status == 1
    assert "created 2, skipped 1, failed 3" in out
    assert "line 4: UNKNOWN_FIELD" in out and "line 5: CONTENT_EMPTY" in out and "line 6: not JSON" in out
    memories = list(Memory.objects.filter(store=store).order_by("created_at"))
    assert [m.content.text for m in memories] == ["The customer ordered 40 crates in May.",
                                                 "Deliveries go to the north gate."]
    assert {(m.lineage, m.provenance) for m in memories} == {("imported", "unknown"), ("imported", "stated")}
    assert set(MemoryAssertion.objects.filter(store=store).values_list("mechanism", flat=True)) == {"import"}


def test_csv_with_json_columns_and_a_dry_run(tmp_path: Path, project: Any) -> None:
    store = MemoryStoreFactory(project=project)
    path = tmp_path / "facts.csv"
    path.write_text('content,tags,lineage\n"The depot opens at six.","{""site"": ""north""}",native\n'
                    'Parcels leave at noon.,,\n', encoding="utf-8")
    out, status = run(path, "--store", store.pk, "--dry-run")
    assert status == 0 and "checked 2" in out and "dry run" in out and not Memory.objects.filter(store=store).exists()
    out, status = run(path, "--store", store.pk)
    assert status == 0 and "created 2" in out
    depot = Memory.objects.get(store=store, content__text="The depot opens at six.")
    assert depot.tags == {"site": "north"} and depot.lineage == "native"


def test_a_missing_store_or_file_is_an_error(tmp_path: Path, project: Any) -> None:
    store = MemoryStoreFactory(project=project)
    with pytest.raises(CommandError, match="No memory store"):
        call_command("memory_engine_import", str(tmp_path / "x.jsonl"), "--store", "ms_nope") if (
            tmp_path / "x.jsonl").write_text("{}") else None
    with pytest.raises(CommandError, match="No such file"):
        call_command("memory_engine_import", str(tmp_path / "missing.jsonl"), "--store", store.pk)
