"""The two teams of one project the access tests share."""

from __future__ import annotations

from typing import Any

import pytest

from tests.access.helpers import ALL, keyed, tag
from tests.factories import MemoryStoreFactory
from tests.search.helpers import make_document, write


@pytest.fixture
def teams(project: Any) -> dict[str, Any]:
    """Team a and team b in one project: a store, memories and a document each."""
    store_a = MemoryStoreFactory(project=project, name="store-a")
    store_b = MemoryStoreFactory(project=project, name="store-b")
    tag(store_a, "team:a")
    tag(store_b, "team:b")
    memory_a = write(store_a, "Team a deploys the billing service on Tuesdays.")
    memory_b = write(store_b, "Team b deploys the billing service on Fridays.")
    doc_a = make_document(project, "/a/runbook.txt", ["Billing service runbook for team a: restart the pods."])
    doc_b = make_document(project, "/b/runbook.txt", ["Billing service runbook for team b: restart the pods."])
    tag(doc_a, "team:a")
    tag(doc_b, "team:b")
    client_a, key_a = keyed(project, [{"pattern": "team:a", "actions": ALL}])
    client_b, key_b = keyed(project, [{"pattern": "team:*b", "actions": ["search"]}])
    return {"store_a": store_a, "store_b": store_b, "memory_a": memory_a, "memory_b": memory_b,
            "doc_a": doc_a, "doc_b": doc_b, "a": client_a, "b": client_b, "key_a": key_a, "key_b": key_b}
