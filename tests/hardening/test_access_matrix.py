"""The access matrix of the one policy (docs/security.md, *The access policy*): every door ×
every kind of principal × own, another team's and another project's object.

Doors: every operation of the OpenAPI schema, every MCP tool, a memory rule's firing, a webhook
delivery and the admin's change, delete and action views of every registered model. Principals
(all of project P): an API key without grants, keys narrowed to team A and to team B, a read-only
key, a view-only staff user, a staff user with grants on team A, a superuser. Objects: the
principal's own team's row, the other team's row (P), another project's row (Q).

The expected outcome of each cell comes from one declared table per kind of door (``DOORS``,
``MCP_DOORS``, ``ADMIN``) and the rules of :func:`expected`; a cell that answers otherwise fails its
door's test, naming the cell, and a door the tables do not list fails ``test_every_door_is_declared``.
A hidden row must answer exactly like an id that does not exist (same status, code and body, ids
aside), and no successful answer may name a row the principal cannot reach. Every call that
changes data runs in a savepoint that is rolled back: the world stays the same for every cell.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.contrib import admin as django_admin
from django.contrib.auth.models import Permission, User
from django.contrib.messages import get_messages
from django.db import transaction
from django.test import Client, override_settings

from memory_engine.conf import engine_settings
from memory_engine.models import (
    Agent,
    Document,
    MemoryRule,
    MemoryStore,
    Project,
    StaffGrants,
    WebhookSubscription,
)
from memory_engine.models.memories import Tier
from memory_engine.services.keys import api_key_create
from memory_engine.services.stores import project_delete

from .mcp_wsgi import mcp_call
from .test_isolation_matrix import (
    BODIES,
    OPERATIONS,
    OWN_CALL_SETUP,
    QUERIES,
    SESSION_PREFIX,
    Answer,
    Operation,
    body_for,
    call,
    own_params,
    path_kind,
    set_dotted,
)
from .world import World, build_world, nonexistent_id

pytestmark = [pytest.mark.django_db, pytest.mark.timeout(600)]

PRINCIPALS = ("unrestricted", "narrowed_a", "narrowed_b", "read_only", "view_staff", "staff_grants", "superuser")
OBJECTS = ("own", "team", "project")
ALL_ACTIONS = ["search", "add", "forget", "purge"]
#: Rows grant tags cover: a principal narrowed to one team must never see the other team's.
TAGGED_KINDS = ("store", "memory", "assertion", "document", "captured_document", "chunk", "document_version",
                "content", "agent", "generation", "memory_rule", "link", "distiller", "entity")

# --------------------------------------------------------------------------- the declared tables

#: How a row reaches principals. ``tagged``: by grant tags (its own, its store's, its document's, its
#: agent's). ``project``: project-wide configuration every principal of the project reads; changing
#: it needs a principal without grants. ``unrestricted``: rows that carry the whole project's feed
#: (webhooks), which do not exist for a principal with grants. ``receipt``: erasure receipts,
#: listed by principals that may purge anywhere (each other principal sees only its own).
#: ``name``: a name inside the caller's project (a subject, a capture's source and reference), not an
#: id: another project's name makes the caller's own row. ``none``: no row in question.
TAGGED, PROJECT_WIDE, UNRESTRICTED, RECEIPT, NAME, NONE = "tagged", "project", "unrestricted", "receipt", "name", "none"


@dataclass(frozen=True)
class Door:
    reach: str
    #: Where the row in question is named: ``path``, ``body``, ``query`` (a required query parameter,
    #: test_isolation_matrix.QUERIES), ``list`` (the rows listed), ``none``.
    at: str
    #: Whether the door changes data (a read-only key and a view-only staff user are refused).
    writes: bool = False
    #: Kinds of row a list door lists.
    lists: tuple[str, ...] = ()
    #: Outcomes that differ from :func:`expected` by design, per (principal, object).
    exceptions: dict[tuple[str, str], str] = field(default_factory=dict)


#: Promote and demote are staff-only: a key without grants is refused with this code (a key with
#: grants already as project-wide configuration; another project's id still answers 404 first).
KEYS_REFUSED = {("unrestricted", obj): "STAGED_GENERATION_FORBIDDEN" for obj in ("own", "team")}
#: Subjects are names: another project's subject name finds or creates the caller's own store
#: (a writer gets it created); another team's subject store answers 404 like a hidden row, where an
#: unused name would be created (a name-keyed route cannot shield that the name is taken;
#: docs/security.md, *Deliberate exceptions*).
SUBJECT_NAMES = {("unrestricted", "project"): "ok", ("narrowed_a", "project"): "ok", ("narrowed_b", "project"): "ok",
                 ("staff_grants", "project"): "ok", ("superuser", "project"): "ok",
                 ("read_only", "project"): "READ_ONLY_KEY", ("view_staff", "project"): "MODEL_PERMISSION_REQUIRED",
                 ("narrowed_a", "team"): "hidden", ("narrowed_b", "team"): "hidden",
                 ("staff_grants", "team"): "hidden"}
#: A capture by (source, external_ref): another project's reference makes the caller's own
#: document; another team's existing one answers 403 GRANT_REQUIRED (a name-keyed route cannot
#: shield that the name is taken; docs/security.md, *Deliberate exceptions*).
CAPTURE_NAMES = {("unrestricted", "project"): "ok", ("narrowed_a", "project"): "ok", ("narrowed_b", "project"): "ok",
                 ("staff_grants", "project"): "ok", ("superuser", "project"): "ok",
                 ("narrowed_a", "team"): "GRANT_REQUIRED", ("narrowed_b", "team"): "GRANT_REQUIRED",
                 ("staff_grants", "team"): "GRANT_REQUIRED"}

W = True  # writes

DOORS: dict[str, Door] = {
    # agents: an agent goes with its own store
    "v1_agents_list": Door(TAGGED, "list", lists=("agent",)),
    "v1_agents_create": Door(TAGGED, "body", W),
    "v1_agents_retrieve": Door(TAGGED, "path"),
    "v1_agents_update": Door(TAGGED, "path", W),
    "v1_agents_partial_update": Door(TAGGED, "path", W),
    "v1_agents_destroy": Door(TAGGED, "path", W),
    "v1_agents_context_create": Door(TAGGED, "path"),
    "v1_agents_tool_guidance_retrieve": Door(TAGGED, "path"),
    "v1_agents_tools_retrieve": Door(TAGGED, "path"),
    "v1_agents_tools_open_memory_create": Door(TAGGED, "path"),
    "v1_agents_tools_list_memories_create": Door(TAGGED, "path"),
    "v1_agents_tools_forget_memory_create": Door(TAGGED, "path", W),
    "v1_agents_tools_search_knowledge_create": Door(TAGGED, "path"),
    "v1_agents_tools_write_memory_create": Door(TAGGED, "path", W),
    "v1_capabilities_retrieve": Door(NONE, "none"),
    # a revocation erases inside the caller's reach, as erasure does: another team's subject is as none
    "v1_consent_revoke_create": Door(NONE, "none", W),
    # distillers go with their store; changing or ticking one needs `add` there (it writes into it)
    "v1_distillers_list": Door(TAGGED, "list", lists=("distiller",)),
    "v1_distillers_create": Door(TAGGED, "body", W),
    "v1_distillers_retrieve": Door(TAGGED, "path"),
    "v1_distillers_partial_update": Door(TAGGED, "path", W),
    "v1_distillers_destroy": Door(TAGGED, "path", W),
    "v1_distillers_runs_list": Door(TAGGED, "path"),
    "v1_distillers_tick_create": Door(TAGGED, "path", W),
    # documents
    "v1_documents_list": Door(TAGGED, "list", lists=("document", "captured_document")),
    "v1_documents_create": Door(NONE, "none", W),
    "documents_batch": Door(NONE, "none", W),
    "documents_upload": Door(NONE, "none", W),
    "documents_capture_by_ref": Door(NAME, "path", W, exceptions=CAPTURE_NAMES),
    "v1_documents_retrieve": Door(TAGGED, "path"),
    "v1_documents_destroy": Door(TAGGED, "path", W),
    "v1_documents_chunks_list": Door(TAGGED, "path"),
    "v1_documents_deprecate_create": Door(TAGGED, "path", W),
    "v1_documents_deprecate_destroy": Door(TAGGED, "path", W),
    "v1_documents_forget_create": Door(TAGGED, "path", W),
    "documents_reingest": Door(TAGGED, "path", W),
    "v1_documents_purge_create": Door(TAGGED, "path", W),
    "v1_documents_retention_create": Door(TAGGED, "path", W),
    "v1_documents_status_retrieve": Door(TAGGED, "path"),
    "v1_documents_versions_list": Door(TAGGED, "path"),
    "v1_documents_versions_retrieve": Door(TAGGED, "path"),
    "v1_embeddings_create": Door(NONE, "none"),
    # entities are seen through the memories and chunks that mention them; merging needs `add` there
    "v1_entities_list": Door(TAGGED, "list", lists=("entity",)),
    "v1_entities_retrieve": Door(TAGGED, "path"),
    "v1_entities_merge_create": Door(TAGGED, "path", W),
    # erasure acts inside the caller's reach: nothing outside it is erased or named
    "v1_erasure_create": Door(NONE, "none", W),
    "v1_erasure_receipts_list": Door(RECEIPT, "list", lists=("erasure_receipt",)),
    "v1_erasure_receipts_retrieve": Door(RECEIPT, "path"),
    "v1_feed_retrieve": Door(TAGGED, "list", lists=("memory", "assertion")),
    "v1_generations_list": Door(TAGGED, "list", lists=("generation",)),
    "v1_generations_create": Door(TAGGED, "body", W),
    "v1_generations_retrieve": Door(TAGGED, "path"),
    "v1_generations_complete_create": Door(TAGGED, "path", W),
    "v1_generations_memory_assertions_list": Door(TAGGED, "path"),
    "v1_ingestion_rules_list": Door(PROJECT_WIDE, "list", lists=("ingestion_rule",)),
    "v1_ingestion_rules_create": Door(PROJECT_WIDE, "none", W),
    "v1_ingestion_rules_retrieve": Door(PROJECT_WIDE, "path"),
    "v1_ingestion_rules_update": Door(PROJECT_WIDE, "path", W),
    "v1_ingestion_rules_partial_update": Door(PROJECT_WIDE, "path", W),
    "v1_ingestion_rules_destroy": Door(PROJECT_WIDE, "path", W),
    "v1_knowledge_search_create": Door(TAGGED, "body"),
    "v1_links_list": Door(TAGGED, "list", lists=("link",)),
    "v1_links_create": Door(TAGGED, "body", W),
    "v1_links_retrieve": Door(TAGGED, "path"),
    "v1_links_destroy": Door(TAGGED, "path", W),
    "v1_memories_list": Door(TAGGED, "list", lists=("memory",)),
    "v1_memories_create": Door(TAGGED, "body", W),
    "v1_memories_batch_create": Door(TAGGED, "body", W),
    "v1_memories_retrieve": Door(TAGGED, "path"),
    "v1_memories_destroy": Door(TAGGED, "path", W),
    "v1_memories_assertions_list": Door(TAGGED, "path"),
    "v1_memories_open_retrieve": Door(TAGGED, "path"),
    "v1_memories_restore_create": Door(TAGGED, "path", W),
    "v1_memories_retention_create": Door(TAGGED, "path", W),
    "v1_memories_revisions_list": Door(TAGGED, "path"),
    "v1_memory_assertions_list": Door(TAGGED, "list", lists=("assertion",)),
    "v1_memory_assertions_retrieve": Door(TAGGED, "path"),
    # the map goes with its store (memory_store_id in the query)
    "v1_memory_map_retrieve": Door(TAGGED, "query"),
    "v1_memory_schema_retrieve": Door(PROJECT_WIDE, "none"),
    "v1_memory_schema_update": Door(PROJECT_WIDE, "none", W),
    "v1_memory_stores_list": Door(TAGGED, "list", lists=("store",)),
    "v1_memory_stores_create": Door(NONE, "none", W),
    "v1_memory_stores_retrieve": Door(TAGGED, "path"),
    "v1_memory_stores_update": Door(TAGGED, "path", W),
    "v1_memory_stores_partial_update": Door(TAGGED, "path", W),
    "v1_memory_stores_destroy": Door(TAGGED, "path", W),
    # memory rules go with their store; changing them needs `add` there (they write into it)
    "v1_memory_stores_rules_list": Door(TAGGED, "path"),
    "v1_memory_stores_rules_create": Door(TAGGED, "path", W),
    "v1_memory_stores_rules_retrieve": Door(TAGGED, "path"),
    "v1_memory_stores_rules_update": Door(TAGGED, "path", W),
    "v1_memory_stores_rules_partial_update": Door(TAGGED, "path", W),
    "v1_memory_stores_rules_destroy": Door(TAGGED, "path", W),
    "v1_replay_runs_list": Door(PROJECT_WIDE, "list", lists=("replay_run",)),
    "v1_replay_runs_retrieve": Door(PROJECT_WIDE, "path"),
    "v1_replay_runs_demote_create": Door(PROJECT_WIDE, "path", W, exceptions=KEYS_REFUSED),
    "v1_replay_runs_promote_create": Door(PROJECT_WIDE, "path", W, exceptions=KEYS_REFUSED),
    "v1_subjects_memory_store_retrieve": Door(NAME, "path", exceptions=SUBJECT_NAMES),
    "v1_timeline_retrieve": Door(TAGGED, "list", lists=("document", "captured_document")),
    "v1_transform_configs_list": Door(PROJECT_WIDE, "list", lists=("transform_config",)),
    "v1_transform_configs_create": Door(PROJECT_WIDE, "none", W),
    "v1_transform_configs_retrieve": Door(PROJECT_WIDE, "path"),
    "v1_webhooks_list": Door(UNRESTRICTED, "list", lists=("webhook",)),
    "v1_webhooks_create": Door(UNRESTRICTED, "none", W),
    "v1_webhooks_retrieve": Door(UNRESTRICTED, "path"),
    "v1_webhooks_destroy": Door(UNRESTRICTED, "path", W),
    "v1_webhooks_deliveries_list": Door(UNRESTRICTED, "path"),
    "v1_webhooks_rotate_secret_create": Door(UNRESTRICTED, "path", W),
}
#: Signed-URL operations take no principal (a token bound to one document): the tenant matrix
#: (test_isolation_matrix.py) proves them.
SIGNED = {"v1_documents_converter_callback_create", "v1_documents_file_retrieve"}


@dataclass(frozen=True)
class Who:
    name: str
    is_key: bool = True
    read_only: bool = False
    view_only: bool = False
    narrowed: bool = False
    superuser: bool = False
    #: The team whose rows are its own ("a" or "b").
    team: str = "a"


WHO = {
    "unrestricted": Who("unrestricted"),
    "narrowed_a": Who("narrowed_a", narrowed=True),
    "narrowed_b": Who("narrowed_b", narrowed=True, team="b"),
    "read_only": Who("read_only", read_only=True),
    "view_staff": Who("view_staff", is_key=False, view_only=True),
    "staff_grants": Who("staff_grants", is_key=False, narrowed=True),
    "superuser": Who("superuser", is_key=False, superuser=True),
}


def reaches(door_reach: str, who: Who, obj: str) -> bool:
    """Whether the row is in ``who``'s reach (the rules of docs/security.md, *The access policy*)."""
    if obj == "project":
        return False
    if door_reach == TAGGED:
        return not (who.narrowed and obj == "team")
    if door_reach == UNRESTRICTED:
        return not who.narrowed
    if door_reach == RECEIPT:  # the world's receipts were made by the system
        return who.name in ("unrestricted", "superuser")
    return True


def expected(door: Door, who: Who, obj: str) -> str:
    """The outcome of a cell: ``ok``, ``hidden`` (exactly as an unknown id), ``listed`` /
    ``unlisted``, or the code of a refusal."""
    if (who.name, obj) in door.exceptions:
        return door.exceptions[(who.name, obj)]
    if door.writes and who.read_only:
        return "READ_ONLY_KEY"
    if door.writes and who.view_only:
        return "MODEL_PERMISSION_REQUIRED"
    if door.writes and who.narrowed and door.reach in (PROJECT_WIDE, UNRESTRICTED) and door.at == "none":
        return "GRANT_REQUIRED"
    if door.writes and who.narrowed and door.reach == PROJECT_WIDE:
        return "GRANT_REQUIRED"
    if door.at == "none":
        return "ok"
    if door.at == "list":
        return "listed" if reaches(door.reach, who, obj) else "unlisted"
    return "ok" if reaches(door.reach, who, obj) else "hidden"


# --------------------------------------------------------------------------- the world


@dataclass
class Matrix:
    own_a: World
    own_b: World
    other: World
    keys: dict[str, str]
    worlds: dict[str, World] = field(init=False)

    def __post_init__(self) -> None:
        self.worlds = {"a": self.own_a, "b": self.own_b}

    def world(self, who: Who, obj: str) -> World:
        if obj == "project":
            return self.other
        mine = self.worlds[who.team]
        return mine if obj == "own" else self.worlds["b" if who.team == "a" else "a"]


def _engine_settings() -> dict[str, Any]:
    from django.conf import settings

    embedding = {**engine_settings.EMBEDDING, "PROVIDER": "tests.providers.HashingEmbeddingProvider",
                 "MODEL": "all-MiniLM-L6-v2"}
    return {**(getattr(settings, "MEMORY_ENGINE", {}) or {}), "EMBEDDING": embedding,
            "OUTBOUND_ALLOW": ["127.0.0.1", "localhost"], "HTTP_RETRIES": 0,
            "RULE_CALLABLE_PREFIXES": ["tests.rules"]}


def _team(world: World, team: str) -> None:
    """Tag a world's stores, documents and agents' own stores ``team:<team>``."""
    tag = [f"team:{team}"]
    MemoryStore.objects.filter(pk__in=world.ids["store"]).update(access_tags=tag)
    MemoryStore.objects.filter(agent_id__in=world.ids["agent"], tier=Tier.AGENT).update(access_tags=tag)
    Document.objects.filter(pk__in=world.ids["document"] + world.ids["captured_document"]).update(access_tags=tag)


def _staff(project: Project, name: str, *, view_only: bool = False, grants: list[Any] | None = None,
           superuser: bool = False) -> str:
    if superuser:
        user = User.objects.create_superuser(name, f"{name}@example.com", "pw")
    else:
        user = User.objects.create_user(name, f"{name}@example.com", "pw", is_staff=True)
        permissions = Permission.objects.filter(content_type__app_label="memory_engine")
        if view_only:
            permissions = permissions.filter(codename__startswith="view_")
        user.user_permissions.set(permissions)
        project.members.add(user)
        if grants:
            StaffGrants.objects.create(user=user, grants=grants)
    return f"{SESSION_PREFIX}{user.pk}@{project.pk}"


@pytest.fixture(scope="module")
def m(django_db_setup: None, django_db_blocker: Any) -> Iterator[Matrix]:
    """The world, committed once for the module (each cell rolls its changes back)."""
    with django_db_blocker.unblock(), override_settings(MEMORY_ENGINE=_engine_settings()):
        own_a = build_world("alpha", external_ref="shared/ref-1")
        own_b = build_world("beta", project=own_a.project, external_ref="shared/ref-beta")
        other = build_world("gamma", external_ref="shared/ref-gamma")
        _team(own_a, "a")
        _team(own_b, "b")
        project = own_a.project
        keys = {
            "unrestricted": own_a.key,
            "narrowed_a": api_key_create(project=project, grants=[{"pattern": "team:a", "actions": ALL_ACTIONS}])[1],
            "narrowed_b": api_key_create(project=project, grants=[{"pattern": "team:b", "actions": ALL_ACTIONS}])[1],
            "read_only": own_a.readonly_key,
            "view_staff": _staff(project, "matrix-viewer", view_only=True),
            "staff_grants": _staff(project, "matrix-team-a", grants=[{"pattern": "team:a", "actions": ALL_ACTIONS}]),
            "superuser": _staff(project, "matrix-root", superuser=True),
        }
    yield Matrix(own_a=own_a, own_b=own_b, other=other, keys=keys)
    with django_db_blocker.unblock():
        for project in (own_a.project, other.project):
            project_delete(project=Project.objects.get(pk=project.pk))
        User.objects.filter(username__startswith="matrix-").delete()


@pytest.fixture(autouse=True)
def _matrix_settings(settings: Any) -> None:
    settings.MEMORY_ENGINE = _engine_settings()


@contextmanager
def rolled_back() -> Iterator[None]:
    """A savepoint rolled back: whatever a cell changes is gone for the next one."""
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


# --------------------------------------------------------------------------- REST cells


def _unknown_params(op: Operation, params: dict[str, str]) -> dict[str, str]:
    return {name: (nonexistent_id(value) if path_kind(op, name) not in ("name", "subject") else value)
            for name, value in params.items()}


def _unknown_body(op: Operation, body: dict[str, Any] | None, world: World) -> dict[str, Any] | None:
    spec = BODIES.get(op.op_id)
    if body is None or spec is None:
        return body
    for dotted, kind in spec.ids.items():
        value = body
        for part in dotted.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        if value:
            body = set_dotted(body, dotted, nonexistent_id(world.first(kind)))
    return body


def _normalized(answer: Answer, world: World, *extra: str) -> str:
    text = answer.text
    for value in sorted({*world.all_ids(), *extra}, key=len, reverse=True):
        text = text.replace(value, "<ID>")
    return f"{answer.status} {re.sub(r'[a-z]+_0{10}[0-9a-f]{16}', '<ID>', text)}"


def classify(answer: Answer) -> str:
    if 200 <= answer.status < 300:
        return "ok"
    code = answer.body.get("code") if isinstance(answer.body, dict) else None
    if answer.status in (400, 404):
        return "hidden"
    return code or f"HTTP {answer.status}"


def _forbidden_ids(m: Matrix, who: Who) -> set[str]:
    """Ids an answer to ``who`` must never name: another project's, and for a principal with
    grants the other team's grant-covered rows."""
    found = set(m.other.all_ids())
    if who.narrowed:
        theirs = m.worlds["b" if who.team == "a" else "a"]
        found |= {value for kind in TAGGED_KINDS for value in theirs.ids.get(kind, [])}
    return found


def rest_cell(m: Matrix, op: Operation, door: Door, who: Who, obj: str) -> tuple[str, str]:
    """(outcome, a note for the failure report) of one cell."""
    world = m.world(who, obj)
    caller_world = m.world(who, "own")
    key = m.keys[who.name]
    if door.at == "list":
        answer = call(op, key, own_params(op, caller_world))
        if answer.status != 200:
            return classify(answer), answer.text[:200]
        ids = {value for kind in door.lists for value in world.ids.get(kind, [])}
        return ("listed" if any(value in answer.text for value in ids) else "unlisted"), ""
    target = world if door.at in ("path", "body", "query") else caller_world
    query = QUERIES[op.op_id](target) if door.at == "query" else None
    with rolled_back():
        if door.at == "path" and (setup := OWN_CALL_SETUP.get(op.op_id)):
            setup(target)
        params = own_params(op, target) if door.at == "path" else own_params(op, caller_world)
        if op.op_id in NAMES:
            params.update(NAMES[op.op_id](target))
        if setup := MATRIX_SETUP.get(op.op_id):
            setup(target)
        body = body_for(op, target)
        answer = call(op, key, params, body, query=query)
    outcome = classify(answer)
    if outcome == "ok":
        sent = {*params.values(), *json.dumps(body, default=str).split('"')} if body else set(params.values())
        sent |= set((query or {}).values())
        named = sorted(i for i in _forbidden_ids(m, who) - sent if i in answer.text)
        return ("ok" if not named else "leak"), f"names {named[:5]}" if named else ""
    if outcome == "hidden":
        with rolled_back():
            unknown_query = {name: nonexistent_id(value) for name, value in query.items()} if query else None
            reference = call(op, key, _unknown_params(op, params), _unknown_body(op, body, target),
                             query=unknown_query)
        if _normalized(answer, target) != _normalized(reference, target):
            return "oracle", (f"answers differently from an unknown id:\n        {_normalized(answer, target)[:240]}"
                              f"\n        {_normalized(reference, target)[:240]}")
    return outcome, answer.text[:200]


def _captured_ref(world: World) -> dict[str, str]:
    document = Document.objects.get(pk=world.first("captured_document"))
    return {"source": str(document.source), "external_ref": str(document.external_ref)}


#: Name parameters taken from the object's world (each world captured under its own reference).
NAMES: dict[str, Callable[[World], dict[str, str]]] = {"documents_capture_by_ref": _captured_ref}


def _promote(world: World) -> None:
    from memory_engine.models import ReplayRun
    from memory_engine.services.documents.replay import generation_promote

    generation_promote(run=ReplayRun.objects.get(pk=world.first("replay_run")), by="test")


#: What a cell needs before its call besides the tenant matrix's own setups (a demote needs a promote).
MATRIX_SETUP: dict[str, Callable[[World], None]] = {"v1_replay_runs_demote_create": _promote}


def _report(rows: list[tuple[str, str, str, str, str]]) -> str:
    return "\n".join(f"  {who:13} {obj:8} expected {want:26} got {got}  {note}" for who, obj, want, got, note in rows)


@pytest.mark.parametrize("op", [op for op in OPERATIONS if op.op_id not in SIGNED], ids=lambda op: op.op_id)
def test_rest_door(op: Operation, m: Matrix) -> None:
    door = DOORS[op.op_id]
    wrong = []
    for name in PRINCIPALS:
        who = WHO[name]
        for obj in (OBJECTS if door.at != "none" else ("own",)):
            want = expected(door, who, obj)
            got, note = rest_cell(m, op, door, who, obj)
            if got != want:
                wrong.append((name, obj, want, got, note))
    assert not wrong, f"{op.label}:\n{_report(wrong)}"


# --------------------------------------------------------------------------- MCP tools


@dataclass(frozen=True)
class Tool:
    writes: bool
    #: The arguments for a world (its live memory, index 1 of its first store).
    arguments: Callable[[World], dict[str, Any]]


MCP_DOORS: dict[str, Tool] = {
    "search_knowledge": Tool(False, lambda w: {"query": "deployment region"}),
    "open_memory": Tool(False, lambda w: {"id": w.ids["memory"][1]}),
    "list_memories": Tool(False, lambda w: {}),
    "write_memory": Tool(True, lambda w: {"content": "The matrix wrote this fact."}),
    "forget_memory": Tool(True, lambda w: {"id": w.ids["memory"][1]}),
}


def mcp_expected(tool: Tool, who: Who, obj: str, *, pinned: bool = True) -> str:
    if not who.is_key:
        return "AUTHENTICATION_REQUIRED"  # the MCP server takes API keys only
    if tool.writes and who.read_only and not pinned:
        return "READ_ONLY_KEY"  # refused before the agent argument is looked up
    if not reaches(TAGGED, who, obj):
        return "hidden"  # a pinned agent is resolved with the connection, before any tool runs
    return "READ_ONLY_KEY" if tool.writes and who.read_only else "ok"


@pytest.mark.parametrize("name", list(MCP_DOORS))
def test_mcp_door(name: str, m: Matrix) -> None:
    """Each tool through the streamable-HTTP endpoint (the stdio server runs the same
    :func:`memory_engine.mcp.server.run_tool`, driven in tests/mcp)."""
    tool = MCP_DOORS[name]
    wrong = []
    for principal in PRINCIPALS:
        who = WHO[principal]
        for obj in OBJECTS:
            world = m.world(who, obj)
            agent = world.ids["agent"][0]
            with rolled_back():
                if who.is_key:
                    answer = mcp_call(m.keys[principal], name, tool.arguments(world), agent=agent)
                    reference_agent = nonexistent_id(agent)
                    reference = mcp_call(m.keys[principal], name, tool.arguments(world), agent=reference_agent)
                else:
                    client = _session(m.keys[principal])
                    response = client.post(f"/mcp/?agent={agent}", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                                           content_type="application/json")
                    answer = reference = None
                    reference_agent = ""
            want = mcp_expected(tool, who, obj)
            if answer is None or reference is None:
                got, note = response.json().get("code", f"HTTP {response.status_code}"), ""
            elif not answer.is_error:
                named = sorted(i for i in _forbidden_ids(m, who) if i in answer.text)
                got, note = ("ok", "") if not named else ("leak", f"names {named[:5]}")
            elif answer.code == "READ_ONLY_KEY":
                got, note = answer.code, ""
            else:
                same = (answer.status, answer.text.replace(agent, "<ID>")) == (
                    reference.status, reference.text.replace(reference_agent, "<ID>"))
                got = "hidden" if same else "oracle"
                note = "" if same else f"{answer.text[:160]} | {reference.text[:160]}"
            if got != want:
                wrong.append((principal, obj, want, got, note))
    assert not wrong, f"MCP {name}:\n{_report(wrong)}"


def _session(key: str) -> Client:
    user_id, _ = key.removeprefix(SESSION_PREFIX).split("@")
    client = Client()
    client.force_login(User.objects.get(pk=user_id))
    return client


# --------------------------------------------------------------------------- rule firing and webhook delivery


RULE = {"on": "generation.completed", "enabled": True,
        "handler": {"type": "callable", "path": "tests.rules.handlers.facts_from_output"}}


def test_rule_firing_door(m: Matrix) -> None:
    """A rule made through the API by each principal on each store fires, as its maker, only
    where the maker may add (the rule's own door is in test_rest_door; firing re-checks)."""
    from memory_engine.models import Generation, Memory
    from memory_engine.models.agents import GenerationStatus
    from memory_engine.services.rules import memory_rule_fire

    door = DOORS["v1_memory_stores_rules_create"]
    wrong = []
    for principal in PRINCIPALS:
        who = WHO[principal]
        for obj in OBJECTS:
            world = m.world(who, obj)
            store = world.first("store")
            with rolled_back():
                made = call(next(op for op in OPERATIONS if op.op_id == "v1_memory_stores_rules_create"),
                            m.keys[principal], {"store_id": store}, RULE)
                got = classify(made)
                if got == "ok":
                    rule = MemoryRule.objects.get(pk=made.body["id"])
                    agent = Agent.objects.get(pk=world.ids["agent"][1])
                    generation = Generation.objects.create(
                        project=agent.project, agent=agent, status=GenerationStatus.COMPLETED,
                        input_messages=[{"role": "user", "content": "x"}], output="The matrix rule wrote this.")
                    counts = memory_rule_fire(rule_id=rule.pk, generation_id=generation.pk) or {}
                    written = Memory.objects.filter(store_id=store, content__text="The matrix rule wrote this.")
                    got = "ok" if counts.get("created") == 1 and written.exists() else f"fired {counts}"
            want = expected(door, who, obj)
            if got != want:
                wrong.append((principal, obj, want, got, ""))
    assert not wrong, f"rule firing:\n{_report(wrong)}"


def test_webhook_delivery_door(m: Matrix) -> None:
    """A subscription made by each principal delivers, as its maker, only the changes its maker
    may see: both teams' for a principal without grants, never another project's."""
    from memory_engine.webhooks import webhook_deliver
    from tests.httpserver import LocalServer

    create = next(op for op in OPERATIONS if op.op_id == "v1_webhooks_create")
    wrong = []
    with LocalServer(lambda method, path, headers, body: (200, {})) as receiver:
        for principal in PRINCIPALS:
            who = WHO[principal]
            with rolled_back():
                made = call(create, m.keys[principal], {}, {"url": f"{receiver.url}/hook"})
                refused = classify(made)
                delivered = ""
                if refused == "ok":
                    WebhookSubscription.objects.filter(pk=made.body["id"]).update(cursor="")  # from the start
                    receiver.requests.clear()
                    while webhook_deliver(subscription_id=made.body["id"]) is not None:
                        pass
                    delivered = " ".join(r["body"].decode() for r in receiver.requests)
            for obj in OBJECTS:
                want = expected(DOORS["v1_webhooks_create"], who, "own")
                if want == "ok":
                    want = "listed" if reaches(TAGGED, who, obj) else "unlisted"
                world = m.world(who, obj)
                if refused != "ok":
                    got = refused
                else:
                    got = "listed" if any(i in delivered for i in world.ids["memory"]) else "unlisted"
                if got != want:
                    wrong.append((principal, obj, want, got, ""))
    assert not wrong, f"webhook delivery:\n{_report(wrong)}"


# --------------------------------------------------------------------------- what an erasure leaves


def _erase_person(world: World, tags: dict[str, str]) -> str:
    """Tag the one memory naming the world's person (its first entity) ``tags``; the person's name."""
    from memory_engine.models import Entity, EntityEdge, Memory

    person = Entity.objects.get(pk=world.ids["entity"][0])
    memories = set(EntityEdge.objects.filter(entity=person).exclude(memory=None).values_list("memory_id", flat=True))
    assert len(memories) == 1 and not EntityEdge.objects.filter(entity=person, memory=None).exists()
    Memory.objects.filter(pk__in=memories).update(tags=tags)
    return person.name


def test_entities_after_erasure_door(m: Matrix) -> None:
    """An erasure made by each principal takes with it the names only the erased rows stated: the
    person only the erased memory named answers ``GET /entities?q=`` for nobody (asked with a key
    without grants of its project) where the erasure reached the memory; elsewhere it stays."""
    erasure = next(op for op in OPERATIONS if op.op_id == "v1_erasure_create")
    entities = next(op for op in OPERATIONS if op.op_id == "v1_entities_list")
    tags = {"erase": "matrix-entities"}
    wrong = []
    for principal in PRINCIPALS:
        who = WHO[principal]
        with rolled_back():
            names = {id(world): _erase_person(world, tags) for world in (m.own_a, m.own_b, m.other)}
            refused = classify(call(erasure, m.keys[principal], {}, {"tags": tags}))
            for obj in OBJECTS:
                world = m.world(who, obj)
                asker = m.other.key if obj == "project" else m.keys["unrestricted"]
                answer = call(entities, asker, {}, query={"q": names[id(world)]})
                found = world.ids["entity"][0] in answer.text or names[id(world)] in answer.text
                got = refused if refused != "ok" else ("kept" if found else "gone")
                want = expected(DOORS["v1_erasure_create"], who, "own")
                if want == "ok":
                    want = "gone" if reaches(TAGGED, who, obj) else "kept"
                if answer.status != 200 or got != want:
                    wrong.append((principal, obj, want, got, answer.text[:160]))
    assert not wrong, f"entities after erasure:\n{_report(wrong)}"


# --------------------------------------------------------------------------- an entity another team named first


def test_entity_view_door(m: Matrix) -> None:
    """An entity the caller's own memory names by an alias (``Quillonvar``): each team world's
    person, named first (and only) by that world's memory. Its detail shows the entity's stored
    name and the earlier first mention, and ``GET /entities?q=`` finds it by that name, only to a
    principal that reaches the world's memory; one narrowed to the other team sees its own view
    (its own spelling, dated by its own mention, not found by the other team's name)."""
    from django.utils import timezone
    from django.utils.dateparse import parse_datetime

    from memory_engine.models import Entity, EntityEdge
    from memory_engine.services.entities import entities_extract_memories
    from memory_engine.services.memories import memory_write

    detail = next(op for op in OPERATIONS if op.op_id == "v1_entities_retrieve")
    listing = next(op for op in OPERATIONS if op.op_id == "v1_entities_list")
    param = re.findall(r"{(\w+)}", detail.path)[0]
    wrong = []
    for principal in PRINCIPALS:
        who = WHO[principal]
        store = MemoryStore.objects.get(pk=m.world(who, "own").first("store"))
        for obj in ("own", "team"):
            person = Entity.objects.get(pk=m.world(who, obj).ids["entity"][0])
            with rolled_back(), override_settings(MEMORY_ENGINE={**_engine_settings(),
                                                                 "ENTITY_RESOLUTION_SIMILARITY": 0}):
                Entity.objects.filter(pk=person.pk).update(aliases=[*person.aliases, "quillonvar"])
                before = timezone.now()
                mine = memory_write(store=store, content="Quillonvar called about the invoice.", principal="test",
                                    mechanism="api").memory
                entities_extract_memories(memory_ids=[mine.pk])
                assert EntityEdge.objects.filter(entity=person, memory=mine).exists()
                shown = call(detail, m.keys[principal], {param: person.pk})
                found = call(listing, m.keys[principal], {}, query={"q": person.name})
            if shown.status != 200 or found.status != 200:
                got = f"HTTP {shown.status}/{found.status}"
            else:
                body = shown.body
                stored = [body["name"] == person.name, parse_datetime(body["created_at"]) < before,
                          person.pk in found.text]
                got = "stored" if all(stored) else "own view" if not any(stored) else f"partly {stored}"
            want = "stored" if reaches(TAGGED, who, obj) else "own view"
            if got != want:
                wrong.append((principal, obj, want, got, shown.text[:160]))
    assert not wrong, f"an entity another team named first:\n{_report(wrong)}"


# --------------------------------------------------------------------------- what a distiller's runs name


def test_distiller_runs_error_ids_door(m: Matrix) -> None:
    """A run of the caller's own team's distiller whose errors name a document version and a memory
    of each team (a distiller reads every document in its scope): the runs list, the distiller's
    detail (its recent runs) and, for staff, the admin's run inline name the other team's rows only
    to a principal that reaches them."""
    from memory_engine.models import DistillerRun

    doors = [next(op for op in OPERATIONS if op.op_id == name)
             for name in ("v1_distillers_runs_list", "v1_distillers_retrieve")]
    wrong = []
    for principal in PRINCIPALS:
        who = WHO[principal]
        mine = m.world(who, "own")
        distiller = mine.first("distiller")
        with rolled_back():
            named = {obj: (m.world(who, obj).first("document_version"), m.world(who, obj).ids["memory"][1])
                     for obj in ("own", "team")}
            DistillerRun.objects.create(project=mine.project, distiller_id=distiller, errors=[
                error for version, memory in named.values()
                for error in ({"version_id": version, "code": "LLM_FAILED", "message": "x"},
                              {"memory_id": memory, "code": "LEGAL_HOLD", "message": "y"})])
            pages = [call(op, m.keys[principal], own_params(op, mine)) for op in doors]
            if not who.is_key:
                page = _session(m.keys[principal]).get(f"/admin/memory_engine/distiller/{distiller}/change/")
                pages.append(Answer(page.status_code, None, page.content.decode()))
        for obj, ids in named.items():
            want = "listed" if reaches(TAGGED, who, obj) else "unlisted"
            for door, answer in zip(("runs", "detail", "admin"), pages, strict=False):
                found = [value in answer.text for value in ids]
                got = (f"HTTP {answer.status}" if answer.status != 200 else
                       "listed" if all(found) else "unlisted" if not any(found) else "partly")
                if got != want:
                    wrong.append((principal, f"{obj}:{door}", want, got, ""))
    assert not wrong, f"distiller runs' error ids:\n{_report(wrong)}"


# --------------------------------------------------------------------------- what an agent's detail names


def test_agent_detail_door(m: Matrix) -> None:
    """The caller's own team's agent, made to search a store and a document of each team and to
    write into the other team's store (a shared agent): its detail, the agents list and, for staff,
    the admin's change page and list name the other team's store and document only to a principal
    that reaches them."""
    doors = [next(op for op in OPERATIONS if op.op_id == name) for name in ("v1_agents_retrieve", "v1_agents_list")]
    wrong = []
    for principal in PRINCIPALS:
        who = WHO[principal]
        mine = m.world(who, "own")
        agent = mine.ids["agent"][0]
        with rolled_back():
            named = {obj: (m.world(who, obj).first("store"), m.world(who, obj).first("document"))
                     for obj in ("own", "team")}
            Agent.objects.filter(pk=agent).update(
                knowledge_config={"memory_store_ids": [named["own"][0], named["team"][0]],
                                  "document_ids": [named["own"][1], named["team"][1]]},
                write_memory_store_id=named["team"][0])
            pages = [call(op, m.keys[principal], own_params(op, mine)) for op in doors]
            if not who.is_key:
                client = _session(m.keys[principal])
                for path in (f"/admin/memory_engine/agent/{agent}/change/", "/admin/memory_engine/agent/"):
                    page = client.get(path)
                    pages.append(Answer(page.status_code, None, page.content.decode()))
        for obj, ids in named.items():
            want = "listed" if reaches(TAGGED, who, obj) else "unlisted"
            for door, answer in zip(("detail", "list", "admin", "admin list"), pages, strict=False):
                if door == "admin list" and obj == "own":
                    continue  # the list shows the write store only (the other team's)
                # the admin's list names the write store
                shown = (MemoryStore.objects.get(pk=ids[0]).name,) if door == "admin list" else ids
                found = [value in answer.text for value in shown]
                got = (f"HTTP {answer.status}" if answer.status != 200 else
                       "listed" if all(found) else "unlisted" if not any(found) else "partly")
                if got != want:
                    wrong.append((principal, f"{obj}:{door}", want, got, ""))
    assert not wrong, f"agent detail:\n{_report(wrong)}"


# --------------------------------------------------------------------------- the admin


@dataclass(frozen=True)
class AdminDoor:
    reach: str
    #: The world kind of its rows.
    kind: str
    #: Whether the change page answers for a reader (False: a model whose rows the admin lists only).
    deletable: bool = True
    #: action name -> True when it changes rows (a view-only user may not run it).
    actions: dict[str, bool] = field(default_factory=dict)
    #: The changelist under /admin/memory_engine/ when it is not the model's own (a sub-list
    #: another admin serves: the memory admin's trash and superseded lists).
    url: str | None = None


RETENTION = {"place_legal_hold": True, "make_durable": True, "make_ephemeral": True}
ADMIN: dict[str, AdminDoor] = {
    "project": AdminDoor(PROJECT_WIDE, "project"),
    "apikey": AdminDoor(PROJECT_WIDE, "apikey", deletable=True, actions={"revoke": True}),
    "memorystore": AdminDoor(TAGGED, "store", actions={"judge_again": True}),
    "memory": AdminDoor(TAGGED, "memory", deletable=False, actions={"forget": True, **RETENTION}),
    "trashedmemory": AdminDoor(TAGGED, "memory", deletable=False, actions={"restore": True}, url="memory/trash"),
    "supersededmemory": AdminDoor(TAGGED, "memory", deletable=False, actions={"forget": True, **RETENTION},
                                  url="memory/superseded"),
    "memoryassertion": AdminDoor(TAGGED, "assertion", deletable=False),
    "memoryschema": AdminDoor(PROJECT_WIDE, "memory_schema"),
    "document": AdminDoor(TAGGED, "document", actions={"reingest": True, "reingest_with_settings": True,
                                                       "reembed_missing": True, **RETENTION}),
    "ingestionrule": AdminDoor(PROJECT_WIDE, "ingestion_rule"),
    "agent": AdminDoor(TAGGED, "agent"),
    "memoryrule": AdminDoor(TAGGED, "memory_rule"),
    "distiller": AdminDoor(TAGGED, "distiller", actions={"tick_now": True}),
    "generation": AdminDoor(TAGGED, "generation", actions={"fire_rules": True}),
    "evidencelink": AdminDoor(TAGGED, "link"),
    "entity": AdminDoor(TAGGED, "entity", deletable=False, actions={"merge_selected": True}),
    "transformconfig": AdminDoor(PROJECT_WIDE, "transform_config", deletable=False, actions={"replay": True}),
    "replayrun": AdminDoor(PROJECT_WIDE, "replay_run", actions={"promote": True, "demote": True}),
    "erasurereceipt": AdminDoor(RECEIPT, "erasure_receipt", deletable=False),
    "retentionchange": AdminDoor(TAGGED, "retention_change", deletable=False),
    "webhooksubscription": AdminDoor(UNRESTRICTED, "webhook", actions={"rotate_secret": True}),
    "staffgrants": AdminDoor(NONE, "staff_grants"),
}
STAFF = ("view_staff", "staff_grants", "superuser")


def admin_expected(door: AdminDoor, who: Who, obj: str, view: str) -> str:
    """``forbidden``: the user may not use the view at all (whatever the row: no oracle); ``hidden``:
    the row is not in the user's changelist (the change page redirects as for an unknown id, an
    action acts on no row); else ``ok``."""
    if door.reach == NONE:  # staff grants: superusers only
        return "ok" if who.superuser else "forbidden"
    # a user with grants reads project-wide rows and changes none (webhooks it does not even read)
    may_change = not who.view_only and not (who.narrowed and door.reach in (PROJECT_WIDE, UNRESTRICTED))
    if view == "delete" and not (door.deletable and may_change):
        return "forbidden"
    if view not in ("change", "delete") and not may_change:
        return "forbidden"
    visible = who.superuser or (obj != "project" and reaches(door.reach, who, obj))
    if door.reach == RECEIPT:  # the world's receipts were made by the system: listed by superusers only
        visible = who.superuser
    return "ok" if visible else "hidden"


def _admin_rows(m: Matrix, door: AdminDoor, who: Who, obj: str) -> list[str]:
    world = m.world(who, obj)
    if door.kind == "project":
        return [world.project.pk]
    if door.kind == "apikey":
        return [str(k) for k in world.project.api_keys.order_by("created_at").values_list("pk", flat=True)[:1]]
    if door.kind == "memory_schema":
        from memory_engine.models import MemorySchema

        schema, _ = MemorySchema.objects.get_or_create(project=world.project)
        return [str(schema.pk)]
    if door.kind == "retention_change":
        from memory_engine.models import RetentionChange

        change = RetentionChange.objects.create(project=world.project, kind="memory", object_id=world.ids["memory"][1],
                                                parent_id=world.first("store"), previous_class="durable",
                                                retention_class="durable", principal="test")
        return [change.pk]
    if door.kind == "staff_grants":
        return [str(StaffGrants.objects.order_by("pk").values_list("pk", flat=True).first())]
    index = {"memory": 1}.get(door.kind, 0)
    return world.ids[door.kind][index:index + 1]


def _admin_setup(model: str, world: World) -> None:
    if model == "trashedmemory":
        from memory_engine.models import Memory
        from memory_engine.services.memory_lifecycle import memory_forget

        memory_forget(memory=Memory.objects.get(pk=world.ids["memory"][1]), principal="test")
    if model == "supersededmemory":  # the first memory, retired by the second
        from django.utils import timezone

        from memory_engine.models import Memory

        Memory.objects.filter(pk=world.ids["memory"][0]).update(superseded_by_id=world.ids["memory"][1],
                                                                invalidated_at=timezone.now())


def admin_cell(m: Matrix, model: str, door: AdminDoor, who: Who, obj: str, view: str) -> tuple[str, str]:
    client = _session(m.keys[who.name])
    world = m.world(who, obj)
    base = f"/admin/memory_engine/{door.url or model}/"
    with rolled_back():
        _admin_setup(model, world)
        rows = world.ids["memory"][:1] if model == "supersededmemory" else _admin_rows(m, door, who, obj)
        if not rows:
            return "no row", ""
        row = rows[0]
        if view == "change":
            response = client.get(f"{base}{row}/change/")
            if response.status_code == 403:
                return "forbidden", ""
            if response.status_code == 302:  # Django's redirect for an id it cannot find
                return "hidden", response["Location"]
            return ("ok" if response.status_code == 200 else f"HTTP {response.status_code}"), ""
        listing = client.get(base)
        if listing.status_code == 403:
            return "forbidden", ""
        listed = listing.context["cl"].queryset.filter(pk=row).exists()
        if view == "delete":
            response = client.post(f"{base}{row}/delete/", {"post": "yes"})
            if response.status_code == 403:
                return "forbidden", ""
            gone = not listing.context["cl"].queryset.model._base_manager.filter(pk=row).exists()
            if gone:
                return "ok", ""
            return ("hidden" if not listed and response.status_code == 302 else f"HTTP {response.status_code}",
                    " ".join(str(message) for message in get_messages(response.wsgi_request))[:200])
        form = listing.context.get("action_form")
        offered = {name for name, _ in form.fields["action"].choices} if form is not None else set()
        if view not in offered:
            return "forbidden", ""
        response = client.post(base, {"action": view, "_selected_action": [row], "index": "0"})
        if response.status_code == 403:
            return "forbidden", ""
        said = " ".join(str(message) for message in get_messages(response.wsgi_request))
        return ("ok" if listed else "hidden"), said[:200]


@pytest.mark.parametrize("model", list(ADMIN))
def test_admin_door(model: str, m: Matrix) -> None:
    door = ADMIN[model]
    views = [*(["change", "delete"] if door.url is None else []), *door.actions]
    wrong = []
    for principal in STAFF:
        who = WHO[principal]
        for obj in OBJECTS:
            for view in views:
                want = admin_expected(door, who, obj, view)
                got, note = admin_cell(m, model, door, who, obj, view)
                if got != want:
                    wrong.append((principal, f"{obj}:{view}", want, got, note))
    assert not wrong, f"admin {model}:\n{_report(wrong)}"


# --------------------------------------------------------------------------- completeness


def test_every_door_is_declared() -> None:
    """A new operation, tool or admin model fails here until its row is added to the tables."""
    operations = {op.op_id for op in OPERATIONS}
    assert operations - set(DOORS) - SIGNED == set(), "operations without a row in DOORS"
    assert set(DOORS) - operations == set(), "rows of DOORS that name no operation"
    from memory_engine.agent_tools import FORGET_MEMORY, LIST_MEMORIES, OPEN_MEMORY, SEARCH_KNOWLEDGE, WRITE_MEMORY

    tools = {d["name"] for d in (SEARCH_KNOWLEDGE, WRITE_MEMORY, OPEN_MEMORY, LIST_MEMORIES, FORGET_MEMORY)}
    assert tools == set(MCP_DOORS)
    registered = {admin_class.model._meta.model_name: admin_class
                  for admin_class in django_admin.site._registry.values()
                  if admin_class.model._meta.app_label == "memory_engine"}
    own_lists = {name for name, door in ADMIN.items() if door.url is None}
    assert set(registered) == own_lists, "admin models without a row in ADMIN (or rows naming none)"
    from memory_engine.admin.memories import SupersededMemoryAdmin, TrashedMemoryAdmin

    registered.update(trashedmemory=TrashedMemoryAdmin, supersededmemory=SupersededMemoryAdmin)
    for name, admin_class in registered.items():
        actions = {action for action in (admin_class.actions or []) if action != "delete_selected"}
        assert actions == set(ADMIN[name].actions), f"admin {name}: its actions and ADMIN's differ"


# --------------------------------------------------------------------------- MCP over stdio (last: its writes commit)


def test_mcp_stdio_door(m: Matrix) -> None:
    """The stdio transport (``manage.py memory_engine_mcp``, a subprocess on the committed world)
    answers each key's tool calls as the HTTP one does. It runs last in this module: the
    subprocess commits what it writes (the module's teardown erases both projects)."""
    import anyio

    from tests.conftest import ROOT
    from tests.mcp.test_stdio import _command, _env

    async def session(key: str, calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
        from mcp import Client, StdioServerParameters

        command = _command("--key", key)
        params = StdioServerParameters(command=command[0], args=command[1:], env=_env(), cwd=str(ROOT))
        async with Client(params) as client:
            return [await client.call_tool(name, arguments) for name, arguments in calls]

    wrong = []
    for principal in ("unrestricted", "narrowed_a", "narrowed_b", "read_only"):
        who = WHO[principal]
        cells = [(name, obj) for name in ("search_knowledge", "list_memories", "open_memory", "write_memory")
                 for obj in OBJECTS]
        calls = [(name, {"agent_id": m.world(who, obj).ids["agent"][0],
                         **MCP_DOORS[name].arguments(m.world(who, obj))}) for name, obj in cells]
        results = anyio.run(session, m.keys[principal], calls)
        for (name, obj), result in zip(cells, results, strict=True):
            want = mcp_expected(MCP_DOORS[name], who, obj, pinned=False)
            body = json.loads(result.content[0].text) if result.is_error else {}
            got = ("ok" if not result.is_error else
                   "hidden" if body.get("code") == "AGENT_NOT_FOUND" else body.get("code", "?"))
            if got == "ok":
                named = sorted(i for i in _forbidden_ids(m, who) if i in result.content[0].text)
                got = "leak" if named else "ok"
            if got != want:
                wrong.append((principal, f"{obj}:{name}", want, got, result.content[0].text[:160]))
    assert not wrong, f"MCP over stdio:\n{_report(wrong)}"
