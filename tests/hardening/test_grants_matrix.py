"""Access inside a project, generated from the OpenAPI schema like the tenant matrix
(test_isolation_matrix.py): two principals of ONE project with disjoint grants.

Worlds A and B live in the same project; A's stores and documents carry ``team:<A>``, B's
``team:<B>``; A's key is granted every action on ``team:<A>`` only, B's on ``team:<B>`` only.
The whole matrix runs twice: with two API keys, and with two staff users of the project (every
model permission, the same grants as ``StaffGrants``) calling with a session.
For every operation on rows that carry grant tags (documents, memory stores, memories, the
ledger, search and the agent recall routes):

* B's key on A's ids in the path -> 404 with the same body as a nonexistent id;
* B's lists hold none of A's rows, and ``count`` is what B sees;
* body fields carrying A's ids answer like nonexistent ids;
* B's own valid call succeeds and never mentions A's ids or texts.

Rows without grant tags (agents, generations, ingestion rules, memory rules, erasure receipts,
the memory schema) are project-wide by design and not part of this matrix.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User

from memory_engine.models import (
    Chunk,
    Document,
    DocumentVersion,
    Memory,
    MemoryAssertion,
    MemoryStore,
    StaffGrants,
)
from memory_engine.services.keys import api_key_create

from .test_isolation_matrix import (
    BODIES,
    OPERATIONS,
    SESSION_PREFIX,
    Operation,
    check_body_ids,
    check_list,
    check_own_call,
    check_path_ids,
    fresh_tag,
    own_params,
    set_dotted,
    untaught,
)
from .world import World, build_world, leaks

pytestmark = pytest.mark.django_db

ALL_ACTIONS = ["search", "add", "forget", "purge"]
#: Path prefixes of the operations on grant-tagged rows.
SCOPED_PREFIXES = ("/api/v1/documents", "/api/v1/memories", "/api/v1/memory-stores/",
                   "/api/v1/memory-assertions", "/api/v1/knowledge/search",
                   "/api/v1/agents/{id}/context", "/api/v1/agents/{id}/tools/search_knowledge",
                   "/api/v1/agents/{id}/tools/open_memory")
#: Scoped in path, but about rows without grant tags or names, not ids (see the module docstring).
UNSCOPED = {
    "/api/v1/documents/{id}/converter-callback",  # signed URL, no key
    "/api/v1/documents/{id}/file",  # signed URL, no key
    "/api/v1/memory-stores/{store_id}/rules",  # memory rules: project-wide rows
    "/api/v1/memory-stores/{store_id}/rules/{id}",
}
#: Kinds whose ids and texts must never reach the other principal.
SCOPED_KINDS = ("store", "memory", "assertion", "document", "captured_document", "chunk", "document_version",
                "content")


def scoped(op: Operation) -> bool:
    return op.keyed and op.path not in UNSCOPED and (
        op.path.startswith(SCOPED_PREFIXES) or op.path == "/api/v1/memory-stores")


SCOPED_OPERATIONS = [op for op in OPERATIONS if scoped(op)]


class ScopedWorld(World):
    """Only grant-tagged rows (and the marker) count as a leak: the project and its project-wide
    rows are shared by both principals."""

    def all_ids(self) -> set[str]:
        return {value for kind in SCOPED_KINDS for value in self.ids.get(kind, [])}


def _restrict(world: World, principal: str = "key") -> World:
    """Tag the world's stores and documents ``team:<marker>`` and give it a principal granted every
    action there (and nothing else): an API key, or a staff member of the project with every
    model permission and those grants (``StaffGrants``)."""
    tag = f"team:{world.marker}"
    MemoryStore.objects.filter(pk__in=world.ids["store"]).update(access_tags=[tag])
    Document.objects.filter(pk__in=world.ids["document"] + world.ids["captured_document"]).update(access_tags=[tag])
    grants = [{"pattern": tag, "actions": ALL_ACTIONS}]
    if principal == "staff":
        user = User.objects.create_user(f"staff-{world.marker}", is_staff=True)
        user.user_permissions.set(Permission.objects.filter(content_type__app_label="memory_engine"))
        world.project.members.add(user)
        StaffGrants.objects.create(user=user, grants=grants)
        raw = f"{SESSION_PREFIX}{user.pk}@{world.project.pk}"
    else:
        _, raw = api_key_create(project=world.project, grants=grants)
    return ScopedWorld(project=world.project, marker=world.marker, key=raw, readonly_key=world.readonly_key,
                       ids=world.ids)


def tagged_counts(world: World) -> dict[str, int]:
    """Row counts of the world's tagged rows (the project's counts include the other principal's)."""
    tag = [f"team:{world.marker}"]
    return {
        "stores": MemoryStore.objects.filter(access_tags__overlap=tag).count(),
        "valid_memories": Memory.objects.filter(store__access_tags__overlap=tag, invalidated_at__isnull=True).count(),
        "assertions": MemoryAssertion.objects.filter(store__access_tags__overlap=tag).count(),
        "documents": Document.objects.filter(access_tags__overlap=tag, forgotten_at__isnull=True).count(),
        "chunks": Chunk.objects.filter(document__access_tags__overlap=tag).count(),
        "document_versions": DocumentVersion.objects.filter(document__access_tags__overlap=tag).count(),
    }


@pytest.fixture(params=["key", "staff"])
def principals(request: pytest.FixtureRequest, hashing_embedder: None, settings: Any) -> tuple[World, World]:
    """Two API keys with disjoint grants, or two staff users with disjoint grants (a session)."""
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "HTTP_RETRIES": 0}
    a = build_world("alpha", external_ref="shared/ref-alpha")
    b = build_world("beta", project=a.project, external_ref="shared/ref-1")
    return _restrict(a, request.param), _restrict(b, request.param)


def test_the_matrix_covers_the_tagged_rows() -> None:
    paths = {op.path for op in SCOPED_OPERATIONS}
    assert {"/api/v1/documents/{id}", "/api/v1/memories/{id}", "/api/v1/memory-stores/{id}",
            "/api/v1/knowledge/search", "/api/v1/memory-assertions"} <= paths, sorted(paths)


def check_project_wide_body_ids(op: Operation, a: World, b: World) -> list[str]:
    """Body fields naming project-wide rows (an agent): A's row is B's too, so the call may
    succeed, but what it reads stays inside B's grants."""
    spec = BODIES.get(op.op_id)
    problems = []
    for dotted, kind in (spec.ids.items() if spec else []):
        if kind in SCOPED_KINDS:
            continue
        got = call_with(op, b, set_dotted(spec.build(b, fresh_tag()), dotted, a.first(kind)))  # type: ignore[union-attr]
        if found := leaks(got, a):
            problems.append(f"body {dotted}=<A's {kind}>: the answer mentions A's {found}")
    return problems


def call_with(op: Operation, w: World, body: dict[str, Any]) -> str:
    from .test_isolation_matrix import call

    return call(op, w.key, own_params(op, w), body).text


@pytest.mark.parametrize("op", SCOPED_OPERATIONS, ids=lambda op: f"{op.method}:{op.path}")
def test_grants_isolation(op: Operation, principals: tuple[World, World], monkeypatch: pytest.MonkeyPatch) -> None:
    assert not untaught(op)
    a, b = principals
    before = tagged_counts(a)
    if spec := BODIES.get(op.op_id):  # ids of project-wide rows: checked by check_project_wide_body_ids
        monkeypatch.setitem(BODIES, op.op_id, replace(spec, ids={k: v for k, v in spec.ids.items()
                                                                 if v in SCOPED_KINDS}))
    # An agent is a project-wide row: A's agent is B's too; what its recall reads is checked below.
    by_agent = op.path.startswith("/api/v1/agents/")
    problems = [*([] if by_agent else check_path_ids(op, a, b)), *check_list(op, a, b),
                *check_body_ids(op, a, b), *check_own_call(op, a, b)]
    if spec:
        monkeypatch.setitem(BODIES, op.op_id, spec)
        problems += check_project_wide_body_ids(op, a, b)
    after = tagged_counts(a)
    if after != before:
        problems.append(f"rows changed: {before} -> {after}")
    assert not problems, f"{op.label}:\n  " + "\n  ".join(problems)
