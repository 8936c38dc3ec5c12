"""Tenant isolation, generated from the OpenAPI schema: every operation is checked, and a new
operation fails here (naming it) until its parameters are taught below.

For each operation, with two projects A and B holding data of every kind:

* every id-bearing path parameter: B's key on A's id -> 404 with the same body as a
  random nonexistent id (no existence oracle), and A's rows unchanged;
* list operations: B's key sees none of A's rows, ``count`` excludes them, and list
  filters naming A's ids answer exactly like filters naming nonexistent ids;
* body fields carrying ids: A's id from B's key -> the same error as a nonexistent id;
* A's read-only key on every unsafe method -> 403 READ_ONLY_KEY, unless the view sets
  ``read_only_key_allowed``;
* signed-URL operations (no API key): A's id with a bad token answers like a random id;
* a valid call with B's own ids succeeds and never mentions A's ids or texts.
"""

from __future__ import annotations

import copy
import json
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import resolve
from drf_spectacular.generators import SchemaGenerator
from rest_framework.test import APIClient

from .world import World, build_world, counts, leaks, nonexistent_id

pytestmark = pytest.mark.django_db

UNSAFE = {"POST", "PUT", "PATCH", "DELETE"}

# --------------------------------------------------------------------------- what ids name

#: `{id}` takes its kind from the path segment before it.
RESOURCE_KINDS = {
    "agents": "agent", "documents": "document", "generations": "generation", "ingestion-rules": "ingestion_rule",
    "memories": "memory", "memory-assertions": "assertion", "memory-stores": "store", "rules": "memory_rule",
    "erasure-receipts": "erasure_receipt", "transform-configs": "transform_config", "replay-runs": "replay_run",
    "webhooks": "webhook", "links": "link", "distillers": "distiller", "entities": "entity",
}
#: Named path and query parameters.
PARAM_KINDS = {
    "agent_id": "agent", "store_id": "store", "memory_store_id": "store", "memory_id": "memory",
    "generation_id": "generation", "rule_id": "memory_rule", "document_id": "document",
    "external_id": "subject",
    "version_id": "document_version",
}
#: Staff-session operations: any key is refused with this code, even on its own project's ids
#: (another project's ids still answer 404 first).
KEY_REFUSED = {"v1_replay_runs_promote_create": "STAGED_GENERATION_FORBIDDEN",
               "v1_replay_runs_demote_create": "STAGED_GENERATION_FORBIDDEN"}
#: Kinds that are names inside the caller's project, not row ids: another project's value names
#: the caller's own row (found or created), never the other project's.
NAMESPACED_KINDS = {"subject"}
#: Path parameters that name a row inside the caller's own project instead of an id (a
#: capture's identity): both worlds use the same values, so B's call on A's names must make
#: or change B's own row and leave A's alone (the row counts check it).
OWN_NAMES = {"source": "wiki", "external_ref": "shared/ref-1"}


@dataclass
class Body:
    """A valid request body for the caller's own world, and where ids sit in it."""

    build: Callable[[World, str], dict[str, Any]]
    #: dotted path -> kind; a list value is replaced by ``[id]``.
    ids: dict[str, str] = field(default_factory=dict)
    #: fields named *_id that are not row ids.
    not_ids: tuple[str, ...] = ()
    format: str = "json"


def _rule_body(w: World, tag: str) -> dict[str, Any]:
    return {"source_agent_ids": [w.first("agent")], "enabled": True,
            "handler": {"type": "http", "url": "http://127.0.0.1:9/never", "agent_id": w.ids["agent"][1]}}


def _agent_body(w: World, tag: str) -> dict[str, Any]:
    return {"name": f"agent-{tag}", "write_memory_store_id": w.first("store"),
            "knowledge_config": {"memory_store_ids": [w.first("store")], "document_ids": [w.first("document")]}}


def _ingestion_rule_body(w: World, tag: str) -> dict[str, Any]:
    return {"name": f"ir-{tag}", "content_type_glob": f"application/x-{tag}", "converter_type": "http",
            "converter_url": "http://127.0.0.1:9/never", "converter_timeout": 5}


AGENT_IDS = {"write_memory_store_id": "store", "knowledge_config.memory_store_ids": "store",
             "knowledge_config.document_ids": "document"}
RULE_IDS = {"source_agent_ids": "agent", "handler.agent_id": "agent"}
SEARCH_QUERY = "deployment region handbook tea"

BODIES: dict[str, Body] = {
    "v1_agents_create": Body(_agent_body, AGENT_IDS),
    "v1_agents_update": Body(_agent_body, AGENT_IDS),
    "v1_agents_partial_update": Body(_agent_body, AGENT_IDS),
    "v1_agents_context_create": Body(
        lambda w, tag: {"messages": [{"role": "user", "content": SEARCH_QUERY}],
                        "override": {"memory_store_ids": [w.ids["store"][1]]}},
        {"override.memory_store_ids": "store", "override.document_ids": "document"},
    ),
    "v1_agents_tools_search_knowledge_create": Body(lambda w, tag: {"query": SEARCH_QUERY, "limit": 5}),
    # the live memory of the store the agent searches (index 0 was superseded)
    "v1_agents_tools_open_memory_create": Body(lambda w, tag: {"id": w.ids["memory"][1]}, {"id": "memory"}),
    "v1_agents_tools_list_memories_create": Body(lambda w, tag: {"limit": 5}),
    # a live memory of the agent's write store
    "v1_agents_tools_forget_memory_create": Body(lambda w, tag: {"id": w.ids["memory"][1]}, {"id": "memory"}),
    "v1_agents_tools_write_memory_create": Body(
        lambda w, tag: {"content": f"Fact {tag} written by a tool.", "generation_id": w.first("generation")},
        {"generation_id": "generation"},
    ),
    "v1_documents_create": Body(lambda w, tag: {"content": f"text {tag}", "path": f"/new/{tag}.txt",
                                                "wait": True}),
    "documents_upload": Body(
        lambda w, tag: {"file": SimpleUploadedFile(f"{tag}.txt", f"upload {tag}".encode(), "text/plain"),
                        "path": f"/up/{tag}.txt"},
        format="multipart",
    ),
    "documents_batch": Body(lambda w, tag: {"documents": [{"content": f"batch {tag}", "path": f"/batch/{tag}.txt"}],
                                            "wait": True}),
    "documents_reingest": Body(lambda w, tag: {"wait": True}),
    "documents_capture_by_ref": Body(lambda w, tag: {"content": f"captured {tag}", "wait": True}),
    "v1_documents_converter_callback_create": Body(lambda w, tag: {"pages": ["x"]}),
    "v1_embeddings_create": Body(lambda w, tag: {"input": ["hello"]}),
    "v1_generations_create": Body(
        lambda w, tag: {"agent_id": w.first("agent"), "input_messages": [{"role": "user", "content": tag}],
                        "initiator_id": w.first("generation")},
        {"agent_id": "agent", "initiator_id": "generation", "started_by_rule_id": "memory_rule"},
    ),
    "v1_generations_complete_create": Body(lambda w, tag: {"output": f"done {tag}", "status": "completed"}),
    "v1_ingestion_rules_create": Body(_ingestion_rule_body),
    "v1_ingestion_rules_update": Body(_ingestion_rule_body),
    "v1_ingestion_rules_partial_update": Body(_ingestion_rule_body),
    "v1_knowledge_search_create": Body(
        lambda w, tag: {"query": SEARCH_QUERY, "memory_store_ids": [w.first("store")],
                        "document_ids": [w.first("document")]},
        {"memory_store_ids": "store", "document_ids": "document", "agent_id": "agent", "entity_ids": "entity"},
    ),
    "v1_memories_create": Body(
        lambda w, tag: {"memory_store_id": w.first("store"), "content": f"Fact {tag} is new."},
        {"memory_store_id": "store"}, not_ids=("conversation_id",),
    ),
    "v1_memories_batch_create": Body(
        lambda w, tag: {"memory_store_id": w.first("store"), "memories": [{"content": f"Fact {tag} in a batch."}]},
        {"memory_store_id": "store"},
    ),
    "v1_links_create": Body(lambda w, tag: {"kind": "contradicts", "source_id": w.ids["memory"][1],
                                            "target_id": w.first("memory")},
                            {"source_id": "memory", "target_id": "memory"}),
    # the world's second entity merged into its first
    "v1_entities_merge_create": Body(lambda w, tag: {"entity_ids": [w.ids["entity"][1]]}, {"entity_ids": "entity"}),
    "v1_webhooks_create": Body(lambda w, tag: {"url": f"http://127.0.0.1:9/hook-{tag}", "event_kinds": ["memory"]}),
    "v1_transform_configs_create": Body(lambda w, tag: {"name": f"config-{tag}", "search": {"rrf_k": 5}}),
    "v1_memory_schema_update": Body(lambda w, tag: {"kinds": ["fact", f"kind_{tag}"]}),
    "v1_memory_stores_create": Body(lambda w, tag: {"name": f"store-{tag}"}, {"agent_id": "agent"},
                                  not_ids=("subject_external_id",)),
    "v1_memory_stores_update": Body(lambda w, tag: {"name": f"store-{tag}"}, {"agent_id": "agent"},
                                  not_ids=("subject_external_id",)),
    "v1_memory_stores_partial_update": Body(lambda w, tag: {"name": f"store-{tag}"}, {"agent_id": "agent"},
                                  not_ids=("subject_external_id",)),
    "v1_documents_forget_create": Body(lambda w, tag: {"reason": f"forget {tag}"}),
    "v1_documents_retention_create": Body(lambda w, tag: {"retention_class": "durable"},
                                          {"version_ids": "document_version"}),
    "v1_memories_retention_create": Body(lambda w, tag: {"retention_class": "durable"}),
    "v1_erasure_create": Body(lambda w, tag: {"subject_external_id": w.first("subject"), "tags": {"erase": tag}},
                              not_ids=("subject_external_id",)),
    "v1_consent_revoke_create": Body(lambda w, tag: {"subject_external_id": w.first("subject"),
                                                     "categories": ["memory:health", "memory:location"]},
                                     not_ids=("subject_external_id",)),
    "v1_memory_stores_rules_create": Body(_rule_body, RULE_IDS),
    "v1_distillers_create": Body(lambda w, tag: {"memory_store_id": w.first("store"), "document_paths": [f"/{tag}/"]},
                                 {"memory_store_id": "store"}),
    "v1_distillers_partial_update": Body(lambda w, tag: {"enabled": True, "document_paths": [f"/{tag}/"]}),
    "v1_memory_stores_rules_update": Body(_rule_body, RULE_IDS),
    "v1_memory_stores_rules_partial_update": Body(_rule_body, RULE_IDS),
}

#: Operations that name their row in a required query parameter (``GET /memory-map?memory_store_id=``):
#: the parameters of the caller's own call, by world. A new operation with a required ``*_id`` query
#: parameter fails :func:`untaught` until it is listed here.
QUERIES: dict[str, Callable[[World], dict[str, str]]] = {
    "v1_memory_map_retrieve": lambda w: {"memory_store_id": w.first("store")},
}

# --------------------------------------------------------------------------- the schema


@dataclass
class Operation:
    method: str
    path: str
    spec: dict[str, Any]

    @property
    def op_id(self) -> str:
        return self.spec["operationId"]

    @property
    def label(self) -> str:
        return f"{self.method} {self.path} ({self.op_id})"

    @property
    def path_params(self) -> list[str]:
        return re.findall(r"{(\w+)}", self.path)

    @property
    def query_params(self) -> list[str]:
        return [p["name"] for p in self.spec.get("parameters", []) if p["in"] == "query"]

    @property
    def keyed(self) -> bool:
        return any("ApiKey" in requirement for requirement in self.spec.get("security", []))

    @property
    def paginated(self) -> bool:
        ok = self.spec.get("responses", {}).get("200", {})
        schema = ok.get("content", {}).get("application/json", {}).get("schema", {})
        return self.method == "GET" and "Paginated" in schema.get("$ref", "")


def load_schema() -> dict[str, Any]:
    return SchemaGenerator().get_schema(request=None, public=True)


SCHEMA = load_schema()
OPERATIONS = [
    Operation(method.upper(), path, spec)
    for path, item in sorted(SCHEMA["paths"].items())
    for method, spec in item.items()
    if method in ("get", "post", "put", "patch", "delete")
]


def _resolve_ref(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = SCHEMA["components"]["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    for key in ("allOf", "oneOf", "anyOf"):
        if key in schema:
            merged: dict[str, Any] = {"properties": {}}
            for part in schema[key]:
                merged["properties"].update(_resolve_ref(part).get("properties", {}))
            return merged
    return schema


def schema_id_fields(op: Operation) -> set[str]:
    """Dotted paths of request-body properties named *_id / *_ids (nested objects included)."""
    content = op.spec.get("requestBody", {}).get("content", {})
    found: set[str] = set()

    def walk(schema: dict[str, Any], prefix: str) -> None:
        for name, prop in _resolve_ref(schema).get("properties", {}).items():
            dotted = f"{prefix}{name}"
            if name.endswith("_id") or name.endswith("_ids"):
                found.add(dotted)
            walk(prop, f"{dotted}.")

    for media in content.values():
        walk(media.get("schema", {}), "")
    return found


def path_kind(op: Operation, name: str) -> str | None:
    if name in OWN_NAMES:
        return "name"
    if name in PARAM_KINDS:
        return PARAM_KINDS[name]
    segments = op.path.split("/")
    at = segments.index("{" + name + "}")
    return RESOURCE_KINDS.get(segments[at - 1])


def untaught(op: Operation) -> list[str]:
    """What the matrix does not know about ``op`` (a new endpoint must be taught, not skipped)."""
    problems = [f"path parameter {{{name}}}: add its kind to RESOURCE_KINDS or PARAM_KINDS"
                for name in op.path_params if path_kind(op, name) is None]
    problems += [f"query parameter ?{name}=: add its kind to PARAM_KINDS" for name in op.query_params
                 if name.endswith("_id") and name not in PARAM_KINDS]
    problems += [f"required query parameter ?{p['name']}=: add QUERIES[{op.op_id!r}]"
                 for p in op.spec.get("parameters", []) if p["in"] == "query" and p.get("required")
                 and p["name"].endswith("_id") and op.op_id not in QUERIES]
    if "requestBody" in op.spec:
        body = BODIES.get(op.op_id)
        if body is None:
            return [*problems, f"request body: add BODIES[{op.op_id!r}]"]
        missing = schema_id_fields(op) - set(body.ids) - set(body.not_ids)
        problems += [f"body field {name}: list it in BODIES[{op.op_id!r}].ids or .not_ids" for name in sorted(missing)]
    return problems


def read_only_allowed(path: str, method: str) -> bool:
    func = resolve(path).func
    cls = getattr(func, "cls", None) or getattr(func, "view_class", None)
    initkwargs = getattr(func, "initkwargs", None) or {}
    if "read_only_key_allowed" in initkwargs:
        return bool(initkwargs["read_only_key_allowed"])
    actions = getattr(func, "actions", None)
    handler = getattr(cls, actions.get(method.lower()), None) if actions else None
    if handler is not None and "read_only_key_allowed" in getattr(handler, "kwargs", {}):
        return bool(handler.kwargs["read_only_key_allowed"])
    return bool(getattr(cls, "read_only_key_allowed", False))


# --------------------------------------------------------------------------- calling


@dataclass
class Answer:
    status: int
    body: Any
    text: str


#: ``key`` of :func:`call` naming a staff user instead of an API key: ``session:<user pk>@<project id>``.
SESSION_PREFIX = "session:"


def call(op: Operation, key: str | None, params: dict[str, str], body: dict[str, Any] | None = None,
         query: dict[str, str] | None = None, headers: dict[str, str] | None = None) -> Answer:
    client = APIClient()
    if key and key.startswith(SESSION_PREFIX):  # a staff user (the grants matrix): session auth, own project
        from django.contrib.auth.models import User

        user_id, project_id = key.removeprefix(SESSION_PREFIX).split("@")
        client.force_authenticate(user=User.objects.get(pk=user_id))
        client.credentials(HTTP_X_PROJECT_ID=project_id)
    elif key:
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    if headers:
        client.credentials(**{f"HTTP_{name.upper().replace('-', '_')}": v for name, v in headers.items()})
    path = op.path.format(**params)
    fmt = BODIES[op.op_id].format if op.op_id in BODIES else "json"
    if op.method in ("GET", "DELETE"):
        response = getattr(client, op.method.lower())(path, query or {})
    else:
        if query:
            path += "?" + "&".join(f"{k}={v}" for k, v in query.items())
        response = getattr(client, op.method.lower())(path, body or {}, format=fmt)
    text = response.content.decode("utf-8", "replace")
    try:
        parsed = json.loads(text) if text else None
    except ValueError:
        parsed = text
    return Answer(response.status_code, parsed, text)


def normalized(answer: Answer, *ids: str) -> str:
    text = answer.text
    for value in ids:
        text = text.replace(value, "<ID>")
    return f"{answer.status} {text}"


def set_dotted(body: dict[str, Any], dotted: str, value: str) -> dict[str, Any]:
    body = copy.deepcopy(body)
    *parents, leaf = dotted.split(".")
    node = body
    for name in parents:
        node = node.setdefault(name, {})
    node[leaf] = [value] if leaf.endswith("_ids") or isinstance(node.get(leaf), list) else value
    return body


def fresh_tag() -> str:
    return uuid.uuid4().hex[:8]


# --------------------------------------------------------------------------- the matrix


@pytest.fixture
def worlds(hashing_embedder: None, settings: Any) -> tuple[World, World]:
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "HTTP_RETRIES": 0}
    return build_world("alpha"), build_world("beta")


def test_schema_has_operations() -> None:
    assert len(OPERATIONS) > 40, [op.label for op in OPERATIONS]


@pytest.mark.parametrize("op", OPERATIONS, ids=lambda op: f"{op.method}:{op.path}")
def test_isolation(op: Operation, worlds: tuple[World, World]) -> None:
    problems = untaught(op)
    if problems:
        pytest.fail(f"{op.label} is not covered by the isolation matrix:\n  " + "\n  ".join(problems))
    a, b = worlds
    before = counts(a)
    problems = []
    if op.keyed:
        problems += check_path_ids(op, a, b)
        problems += check_list(op, a, b)
        problems += check_body_ids(op, a, b)
        problems += check_query_ids(op, a, b)
        problems += check_read_only(op, a)
        problems += check_own_call(op, a, b)
    else:
        problems += check_signed(op, a, b)
    after = counts(a)
    if after != before:
        problems.append(f"project A's rows changed: {before} -> {after}")
    assert not problems, f"{op.label}:\n  " + "\n  ".join(problems)


#: Operations whose own call needs another row than the first of its kind: open needs a live
#: memory (index 0 was superseded), restore one in the trash (OWN_CALL_SETUP puts it there).
OWN_INDEX = {"v1_memories_open_retrieve": 1, "v1_memories_restore_create": 2}


def _trash_memory(w: World) -> None:
    from memory_engine.models import Memory
    from memory_engine.services.memory_lifecycle import memory_forget

    memory_forget(memory=Memory.objects.get(pk=w.ids["memory"][2]), principal="test")


#: What the caller's world needs before an operation's own call.
def _forget_document(w: World) -> None:
    from memory_engine.models import Document
    from memory_engine.services.retention import document_forget

    document_forget(document=Document.objects.get(pk=w.first("document")), reason="test", principal="test")


OWN_CALL_SETUP: dict[str, Callable[[World], None]] = {"v1_memories_restore_create": _trash_memory,
                                                      "v1_documents_purge_create": _forget_document}


def own_params(op: Operation, w: World) -> dict[str, str]:
    params = {}
    for name in op.path_params:
        kind = path_kind(op, name)
        # A running generation (index 0) can still be completed; the memory rule lives on store 0.
        params[name] = OWN_NAMES[name] if kind == "name" else w.ids[kind][OWN_INDEX.get(op.op_id, 0)]
    return params


def body_for(op: Operation, w: World) -> dict[str, Any] | None:
    body = BODIES.get(op.op_id)
    return body.build(w, fresh_tag()) if body else None


def check_path_ids(op: Operation, a: World, b: World) -> list[str]:
    """B's key on A's ids (each param alone, then all) -> 404, same body as a random id."""
    id_params = [name for name in op.path_params if name not in OWN_NAMES]
    if not id_params:
        return []
    if any(path_kind(op, name) in NAMESPACED_KINDS for name in op.path_params):
        return check_namespaced(op, a, b)
    problems = []
    variants = [[name] for name in id_params]
    if len(id_params) > 1:
        variants.append(id_params)
    for foreign in variants:
        theirs, random = own_params(op, b), own_params(op, b)
        swapped = []
        for name in foreign:
            theirs[name] = own_params(op, a)[name]
            random[name] = nonexistent_id(theirs[name])
            swapped += [theirs[name], random[name]]
        got = call(op, b.key, theirs, body_for(op, b))
        ref = call(op, b.key, random, body_for(op, b))
        where = ", ".join(f"{{{name}}}" for name in foreign)
        if got.status != 404:
            problems.append(f"A's id in {where} from B's key answered {got.status}, not 404: {got.text[:300]}")
        if normalized(got, *swapped) != normalized(ref, *swapped):
            problems.append(f"A's id in {where} answers differently from a nonexistent id (an existence oracle):"
                            f"\n    A's id: {normalized(got, *swapped)[:300]}\n    random: "
                            f"{normalized(ref, *swapped)[:300]}")
        if found := leaks(got.text, a, sent=tuple(swapped)):
            problems.append(f"A's id in {where}: the answer mentions A's {found}")
    return problems


def check_namespaced(op: Operation, a: World, b: World) -> list[str]:
    """B's key on A's name (a subject): B's own row answers, never A's."""
    params = {name: a.first(path_kind(op, name) or "") for name in op.path_params}
    got = call(op, b.key, params, body_for(op, b))
    problems = []
    if not 200 <= got.status < 300:
        problems.append(f"A's name from B's key answered {got.status}: {got.text[:300]}")
    if found := leaks(got.text, a, sent=tuple(params.values())):
        problems.append(f"A's name from B's key: the answer mentions A's {found}")
    return problems


def check_list(op: Operation, a: World, b: World) -> list[str]:
    """B lists: none of A's rows, counts exclude them; filters naming A's ids answer like random ids."""
    if not op.paginated:
        return []
    problems = []
    params = own_params(op, b)
    answer = call(op, b.key, params)
    if answer.status != 200:
        return [f"listing with B's own ids answered {answer.status}: {answer.text[:300]}"]
    if found := leaks(answer.text, a):
        problems.append(f"B's list shows A's {found}")
    if answer.body["count"] != len(answer.body["results"]):
        problems.append(f"count {answer.body['count']} != {len(answer.body['results'])} rows B can see")
    for name in op.query_params:
        if name.endswith("_id"):
            value, random = a.first(PARAM_KINDS[name]), None
            random = nonexistent_id(value)
            got = call(op, b.key, params, query={name: value})
            ref = call(op, b.key, params, query={name: random})
        elif name == "tags":
            got = call(op, b.key, params, query={name: json.dumps({"team": a.marker})})
            ref = call(op, b.key, params, query={name: json.dumps({"team": "nobody"})})
            value = random = a.marker
        else:
            continue
        if normalized(got, value, random) != normalized(ref, value, random):
            problems.append(f"?{name}= with A's value answers differently from a nonexistent one:\n    "
                            f"{normalized(got, value, random)[:300]}\n    {normalized(ref, value, random)[:300]}")
        if got.status == 200 and got.body["count"] != 0:
            problems.append(f"?{name}= with A's value counts {got.body['count']} rows")
        if found := leaks(got.text, a, sent=(value,)):
            problems.append(f"?{name}= with A's value shows A's {found}")
    return problems


def check_body_ids(op: Operation, a: World, b: World) -> list[str]:
    """Each id-bearing body field set to A's id -> the same error as a nonexistent id."""
    spec = BODIES.get(op.op_id)
    if spec is None or not spec.ids:
        return []
    problems = []
    params = own_params(op, b)
    for dotted, kind in spec.ids.items():
        value = a.first(kind)
        random = nonexistent_id(value)
        got = call(op, b.key, params, set_dotted(spec.build(b, fresh_tag()), dotted, value))
        ref = call(op, b.key, params, set_dotted(spec.build(b, fresh_tag()), dotted, random))
        if got.status < 400:
            problems.append(f"body {dotted}=<A's {kind}> from B's key was accepted ({got.status}): {got.text[:300]}")
        got_code = got.body.get("code") if isinstance(got.body, dict) else None
        ref_code = ref.body.get("code") if isinstance(ref.body, dict) else None
        if (got.status, got_code) != (ref.status, ref_code) or normalized(got, value, random) != normalized(
            ref, value, random
        ):
            problems.append(f"body {dotted}: A's id and a nonexistent id answer differently:\n    "
                            f"{normalized(got, value, random)[:300]}\n    {normalized(ref, value, random)[:300]}")
        if found := leaks(got.text, a, sent=(value,)):
            problems.append(f"body {dotted}=<A's {kind}>: the answer mentions A's {found}")
    return problems


def check_query_ids(op: Operation, a: World, b: World) -> list[str]:
    """Each id in a required query parameter set to A's id -> 400 UNKNOWN_SCOPE (an id a request refers
    to, not its path), the same answer as a nonexistent id."""
    build = QUERIES.get(op.op_id)
    if build is None:
        return []
    problems = []
    params = own_params(op, b)
    for name in build(b):
        value = build(a)[name]
        random = nonexistent_id(value)
        got = call(op, b.key, params, body_for(op, b), query={**build(b), name: value})
        ref = call(op, b.key, params, body_for(op, b), query={**build(b), name: random})
        if (got.status, got.body.get("code") if isinstance(got.body, dict) else None) != (400, "UNKNOWN_SCOPE"):
            problems.append(f"?{name}=<A's id> from B's key answered {got.status}, not 400 UNKNOWN_SCOPE: "
                            f"{got.text[:300]}")
        if normalized(got, value, random) != normalized(ref, value, random):
            problems.append(f"?{name}=: A's id and a nonexistent id answer differently:\n    "
                            f"{normalized(got, value, random)[:300]}\n    {normalized(ref, value, random)[:300]}")
        if found := leaks(got.text, a, sent=(value,)):
            problems.append(f"?{name}=<A's id>: the answer mentions A's {found}")
    return problems


def check_read_only(op: Operation, a: World) -> list[str]:
    if op.method not in UNSAFE:
        return []
    params = own_params(op, a)
    path = op.path.format(**params)
    allowed = read_only_allowed(path, op.method)
    answer = call(op, a.readonly_key, params, body_for(op, a))
    code = answer.body.get("code") if isinstance(answer.body, dict) else None
    if allowed:
        if code == "READ_ONLY_KEY" or answer.status >= 500:
            return [f"read_only_key_allowed, yet a read-only key got {answer.status} {answer.text[:300]}"]
        return []
    if (answer.status, code) != (403, "READ_ONLY_KEY"):
        return [f"a read-only key got {answer.status} {answer.text[:300]}, not 403 READ_ONLY_KEY"]
    return []


def check_own_call(op: Operation, a: World, b: World) -> list[str]:
    """The fixture is valid: B's own ids succeed, and the answer never mentions A."""
    if setup := OWN_CALL_SETUP.get(op.op_id):
        setup(b)
    query = QUERIES[op.op_id](b) if op.op_id in QUERIES else None
    answer = call(op, b.key, own_params(op, b), body_for(op, b), query=query)
    problems = []
    if refused := KEY_REFUSED.get(op.op_id):
        if answer.status != 403 or (answer.body or {}).get("code") != refused:
            problems.append(f"B's own call should be refused with 403 {refused}: {answer.status} {answer.text[:300]}")
    elif not 200 <= answer.status < 300:
        problems.append(f"B's own call failed ({answer.status}: {answer.text[:300]}); fix the BODIES fixture")
    if found := leaks(answer.text, a):
        problems.append(f"B's own call mentions A's {found}")
    return problems


def check_signed(op: Operation, a: World, b: World) -> list[str]:
    """Signed-URL operations: A's id with a forged token answers exactly like a random id."""
    value = a.first("document")
    random = nonexistent_id(value)
    token = {"X-Memory-Engine-Token": "forged"}
    got = call(op, None, {"id": value}, body_for(op, b), headers=token)
    ref = call(op, None, {"id": random}, body_for(op, b), headers=token)
    problems = []
    if got.status < 400:
        problems.append(f"a forged token was accepted ({got.status})")
    if normalized(got, value, random) != normalized(ref, value, random):
        problems.append(f"A's id and a random id answer differently:\n    {normalized(got, value, random)[:300]}"
                        f"\n    {normalized(ref, value, random)[:300]}")
    return problems
