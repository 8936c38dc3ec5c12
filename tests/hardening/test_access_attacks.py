"""The attacks of a review against the doors that kept their own copy of access (issue: *Trust in
one place*), replayed the way an attacker inside a project would: a key narrowed by grants to
``team:a``, a read-only key, a view-only staff user. Each answered wrongly before the one access
policy (memory_engine.policy) and answers like a row that does not exist, or refuses, now."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from django.contrib.auth.models import Permission, User
from django.test import Client

from memory_engine.models import (
    Agent,
    ApiKey,
    Document,
    DocumentVersion,
    ErasureReceipt,
    Generation,
    Memory,
    MemoryAssertion,
    MemoryRule,
    MemoryStore,
    RetentionChange,
    WebhookSubscription,
)
from memory_engine.models.agents import GenerationStatus
from memory_engine.models.memories import Tier
from memory_engine.services.keys import api_key_create, api_key_revoke
from memory_engine.services.memories import memory_write
from memory_engine.services.rules import memory_rule_fire
from memory_engine.services.stores import subject_store_get_or_create
from tests.conftest import api_client
from tests.factories import AgentFactory, MemoryStoreFactory

from .mcp_wsgi import mcp_call
from .world import nonexistent_id

pytestmark = pytest.mark.django_db

ALL = ["search", "add", "forget", "purge"]
SECRET = "The vault code of team b is 4471."


def _tagged(obj: Any, *tags: str) -> Any:
    type(obj).objects.filter(pk=obj.pk).update(access_tags=list(tags))
    obj.refresh_from_db()
    return obj


def make_document(project: Any, path: str, texts: list[str]) -> Document:
    """A ready document with its first version, captured through the services."""
    from memory_engine.services.documents import document_create_text, document_ingest

    document = document_create_text(project=project, content="\n\n".join(texts), path=path, enqueue=False)
    document_ingest(document_id=document.pk)
    return Document.objects.get(pk=document.pk)


def _key(project: Any, grants: list[dict[str, Any]] | None = None, **kwargs: Any) -> tuple[str, ApiKey]:
    key, raw = api_key_create(project=project, grants=grants, **kwargs)
    return raw, key


@pytest.fixture
def world(project: Any, hashing_embedder: None, settings: Any) -> dict[str, Any]:
    """Team a and team b of one project: a store each, team b's holding a secret; an agent of
    team b whose own store holds a memory under legal hold; a shared agent (both teams reach it)
    that writes into team b's store; keys narrowed to each team and one without grants."""
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "RULE_CALLABLE_PREFIXES": ["tests.rules"]}
    store_a = _tagged(MemoryStoreFactory(project=project, name="store-a"), "team:a")
    store_b = _tagged(MemoryStoreFactory(project=project, name="store-b"), "team:b")
    secret = memory_write(store=store_b, content=SECRET, principal="test", mechanism="api").memory
    mine = memory_write(store=store_a, content="Team a ships on Tuesdays.", principal="test", mechanism="api").memory
    agent_b = AgentFactory(project=project, name="agent-b", access_tags=["team:b"])
    own_b = MemoryStore.objects.get(agent=agent_b, tier=Tier.AGENT)
    held = memory_write(store=own_b, content="Team b's incident notes for the audit.", principal="test",
                        mechanism="api").memory
    Memory.objects.filter(pk=held.pk).update(retention_class="legal_hold")
    shared = AgentFactory(project=project, name="shared", write_memory_store=store_b, access_tags=["team:a", "team:b"])
    raw_a, key_a = _key(project, [{"pattern": "team:a", "actions": ALL}])
    raw_b, key_b = _key(project, [{"pattern": "team:b", "actions": ALL}])
    raw_all, _ = _key(project)
    return {"project": project, "store_a": store_a, "store_b": store_b, "secret": secret, "mine": mine,
            "agent_b": agent_b, "own_b": own_b, "held": held, "shared": shared, "raw_a": raw_a, "key_a": key_a,
            "raw_b": raw_b, "key_b": key_b, "raw_all": raw_all, "a": api_client(raw_a), "b": api_client(raw_b),
            "all": api_client(raw_all)}


# --------------------------------------------------------------------------- MCP write_memory


def test_mcp_write_memory_keeps_to_the_callers_grants(world: dict[str, Any]) -> None:
    before = Memory.objects.filter(store=world["store_b"]).count()
    # through a shared agent whose write store is team b's: as if it had none
    written = mcp_call(world["raw_a"], "write_memory", {"content": "Team a was here."}, agent=world["shared"].pk)
    assert (written.is_error, written.code) == (True, "NO_WRITE_MEMORY_STORE"), written.text
    # the same call over REST answers the same
    rest = world["a"].post(f"/api/v1/agents/{world['shared'].pk}/tools/write_memory",
                           {"content": "Team a was here."}, format="json")
    assert (rest.status_code, rest.json()["code"]) == (400, "NO_WRITE_MEMORY_STORE")
    # a guessed secret learns nothing: no "skipped" with team b's memory id
    oracle = mcp_call(world["raw_a"], "write_memory", {"content": SECRET}, agent=world["shared"].pk)
    assert oracle.is_error and world["secret"].pk not in oracle.text and "skipped" not in oracle.text
    # team b's own agent is out of team a's reach entirely
    hidden = mcp_call(world["raw_a"], "write_memory", {"content": "x y z"}, agent=world["agent_b"].pk)
    assert hidden.status == 404 and hidden.body["code"] == "AGENT_NOT_FOUND"
    assert Memory.objects.filter(store=world["store_b"]).count() == before
    # with team b's key the same door writes
    assert not mcp_call(world["raw_b"], "write_memory", {"content": "Team b was here."},
                        agent=world["shared"].pk).is_error
    assert Memory.objects.filter(store=world["store_b"]).count() == before + 1


def test_mcp_write_memory_into_another_principals_subject(world: dict[str, Any]) -> None:
    store, _ = subject_store_get_or_create(project=world["project"], external_id="bob")
    _tagged(store, f"owner:{world['key_b'].pk}")
    answer = mcp_call(world["raw_a"], "write_memory", {"content": "Bob likes tea."}, agent=world["shared"].pk,
                      subject="bob")
    assert (answer.is_error, answer.code) == (True, "NOT_FOUND"), answer.text
    assert not Memory.objects.filter(store=store).exists()


# --------------------------------------------------------------------------- agent deletion


def test_deleting_an_agent_keeps_to_grants_and_legal_hold(world: dict[str, Any]) -> None:
    agent, held = world["agent_b"], world["held"]
    ledger = MemoryAssertion.objects.filter(memory=held).count()
    hidden = world["a"].delete(f"/api/v1/agents/{agent.pk}")
    unknown = world["a"].delete(f"/api/v1/agents/{nonexistent_id(agent.pk)}")
    assert hidden.status_code == unknown.status_code == 404
    assert hidden.json()["code"] == unknown.json()["code"] == "AGENT_NOT_FOUND"
    # a key that reaches the agent: the memory under legal hold stops the cascade
    for client in (world["b"], world["all"]):
        refused = client.delete(f"/api/v1/agents/{agent.pk}")
        assert (refused.status_code, refused.json()["code"]) == (409, "LEGAL_HOLD")
        assert refused.json()["details"]["memory_ids"] == [held.pk]
    assert Agent.objects.filter(pk=agent.pk).exists() and Memory.objects.filter(pk=held.pk).exists()
    assert MemoryAssertion.objects.filter(memory=held).count() == ledger
    # a key that may only search team b's rows may not delete its agent
    searcher = api_client(_key(world["project"], [{"pattern": "team:b", "actions": ["search"]}])[0])
    Memory.objects.filter(pk=held.pk).update(retention_class="durable")
    refused = searcher.delete(f"/api/v1/agents/{agent.pk}")
    assert (refused.status_code, refused.json()["code"]) == (403, "GRANT_REQUIRED")
    assert refused.json()["details"] == {"action": "purge"}
    assert world["b"].delete(f"/api/v1/agents/{agent.pk}").status_code == 204
    assert not Memory.objects.filter(pk=held.pk).exists()


def test_an_agent_made_by_a_narrowed_key_is_its_own(world: dict[str, Any]) -> None:
    made = world["a"].post("/api/v1/agents", {"name": "helper-a"}, format="json")
    assert made.status_code == 201, made.json()
    own = MemoryStore.objects.get(pk=made.json()["memory_store_id"])
    assert own.access_tags == [f"owner:{world['key_a'].pk}"]
    assert world["b"].get(f"/api/v1/agents/{made.json()['id']}").status_code == 404
    assert made.json()["id"] not in world["b"].get("/api/v1/agents").content.decode()
    assert world["all"].get(f"/api/v1/agents/{made.json()['id']}").status_code == 200


# --------------------------------------------------------------------------- the feed


@pytest.mark.django_db(transaction=True)
def test_the_feed_is_narrowed_and_its_cursor_moves_past_hidden_entries(world: dict[str, Any]) -> None:
    # Entries are read once their transaction ended: this test commits its writes.
    everything = world["all"].get("/api/v1/feed", {"limit": 1000}).json()
    assert world["secret"].pk in json.dumps(everything)
    page = world["a"].get("/api/v1/feed", {"limit": 1000}).json()
    text = json.dumps(page)
    for hidden in (world["secret"].pk, world["store_b"].pk, world["held"].pk, world["own_b"].pk):
        assert hidden not in text
    assert world["mine"].pk in text
    # a run of team b's changes: team a's cursor still advances, and its pages stay empty
    for index in range(30):
        memory_write(store=world["store_b"], content=f"Team b note number {index} about deploys.",
                     principal="test", mechanism="api")
    cursor = page["next_cursor"]
    later = world["a"].get("/api/v1/feed", {"after": cursor, "limit": 5}).json()
    assert later["entries"] == [] and later["next_cursor"] != cursor
    end = world["all"].get("/api/v1/feed", {"after": cursor, "limit": 1000}).json()["next_cursor"]
    while later["next_cursor"] != cursor:  # pages of 5 visible entries read at most 50 entries each
        cursor = later["next_cursor"]
        later = world["a"].get("/api/v1/feed", {"after": cursor, "limit": 5}).json()
        assert later["entries"] == []
    assert cursor == end


# --------------------------------------------------------------------------- memory rules


def _fire(world: dict[str, Any], rule_id: str) -> dict[str, Any]:
    agent = AgentFactory(project=world["project"])
    generation = Generation.objects.create(project=world["project"], agent=agent, output="We ship on Mondays now.",
                                           input_messages=[{"role": "user", "content": "When do we ship?"}],
                                           status=GenerationStatus.COMPLETED)
    counts = memory_rule_fire(rule_id=rule_id, generation_id=generation.pk)
    assert counts is not None
    return counts


RULE = {"on": "generation.completed", "handler": {"type": "callable", "path": "tests.rules.handlers.facts_from_output"}}


def test_memory_rules_write_only_where_their_principal_may(world: dict[str, Any]) -> None:
    store_b = world["store_b"]
    hidden = world["a"].post(f"/api/v1/memory-stores/{store_b.pk}/rules", RULE, format="json")
    unknown = world["a"].post(f"/api/v1/memory-stores/{nonexistent_id(store_b.pk)}/rules", RULE, format="json")
    assert hidden.status_code == unknown.status_code == 404
    assert hidden.json()["code"] == unknown.json()["code"] == "MEMORY_STORE_NOT_FOUND"
    assert not MemoryRule.objects.filter(store=store_b).exists()
    searcher_raw, searcher = _key(world["project"], [{"pattern": "team:b", "actions": ["search"]}])
    refused = api_client(searcher_raw).post(f"/api/v1/memory-stores/{store_b.pk}/rules", RULE, format="json")
    assert (refused.status_code, refused.json()["code"]) == (403, "GRANT_REQUIRED")
    # a rule acts as the key that made it, checked again at every firing
    made = world["a"].post(f"/api/v1/memory-stores/{world['store_a'].pk}/rules", RULE, format="json")
    assert made.status_code == 201, made.json()
    rule = MemoryRule.objects.get(pk=made.json()["id"])
    assert rule.acting_as == f"key:{world['key_a'].pk}"
    assert _fire(world, rule.pk)["created"] == 1
    ApiKey.objects.filter(pk=world["key_a"].pk).update(grants=[{"pattern": "team:a", "actions": ["search"]}])
    before = Memory.objects.filter(store=world["store_a"]).count()
    counts = _fire(world, rule.pk)
    assert counts["created"] == 0 and counts["error"]["code"] == "GRANT_REQUIRED"
    api_key_revoke(key=world["key_a"])
    counts = _fire(world, rule.pk)
    assert counts["created"] == 0 and counts["error"]["code"] == "PRINCIPAL_INACTIVE"
    assert Memory.objects.filter(store=world["store_a"]).count() == before


# --------------------------------------------------------------------------- legal hold release


def test_releasing_a_legal_hold_needs_the_hold_action(world: dict[str, Any], project: Any) -> None:
    mine = world["mine"]
    path = f"/api/v1/memories/{mine.pk}/retention"
    assert world["a"].post(path, {"retention_class": "legal_hold"}, format="json").status_code == 200
    for client in (world["a"], world["all"]):  # every action but hold, and a key without grants
        refused = client.post(path, {"retention_class": "durable"}, format="json")
        assert (refused.status_code, refused.json()["code"]) == (403, "GRANT_REQUIRED")
        assert refused.json()["details"] == {"action": "hold"}
        assert world["a"].delete(f"/api/v1/memories/{mine.pk}").status_code == 409
    holder = api_client(_key(project, [{"pattern": "team:a", "actions": ["search", "forget", "hold"]}])[0])
    released = holder.post(path, {"retention_class": "durable"}, format="json")
    assert released.status_code == 200, released.json()
    changes = list(RetentionChange.objects.filter(object_id=mine.pk).order_by("created_at", "id")
                   .values_list("previous_class", "retention_class"))
    assert changes == [("durable", "legal_hold"), ("legal_hold", "durable")]
    assert world["a"].delete(f"/api/v1/memories/{mine.pk}").status_code == 204


def test_releasing_a_document_hold_and_staff_permissions(world: dict[str, Any], project: Any) -> None:
    document = _tagged(make_document(project, "/a/policy.txt", ["The policy of team a."]), "team:a")
    path = f"/api/v1/documents/{document.pk}/retention"
    assert world["a"].post(path, {"retention_class": "legal_hold"}, format="json").status_code == 200
    refused = world["a"].post(path, {"retention_class": "ephemeral"}, format="json")
    assert (refused.status_code, refused.json()["details"]) == (403, {"action": "hold"})
    assert set(DocumentVersion.objects.filter(document=document).values_list("retention_class", flat=True)) == {
        "legal_hold"}
    staff = User.objects.create_user("operator", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(content_type__app_label="memory_engine")
                               .exclude(codename="release_legal_hold"))
    project.members.add(staff)
    session = Client()
    session.force_login(staff)
    headers = {"HTTP_X_PROJECT_ID": project.pk}
    refused = session.post(path, {"retention_class": "durable"}, content_type="application/json", **headers)
    assert (refused.status_code, refused.json()["details"]) == (403, {"action": "hold"})
    staff.user_permissions.add(Permission.objects.get(codename="release_legal_hold"))
    staff = User.objects.get(pk=staff.pk)  # a fresh permission cache
    session.force_login(staff)
    released = session.post(path, {"retention_class": "durable"}, content_type="application/json", **headers)
    assert released.status_code == 200, released.content
    assert RetentionChange.objects.filter(parent_id=document.pk, previous_class="legal_hold",
                                          principal="user:operator").exists()


# --------------------------------------------------------------------------- the low findings


def test_webhook_secrets_are_shown_once(world: dict[str, Any], project: Any) -> None:
    made = world["all"].post("/api/v1/webhooks", {"url": "http://127.0.0.1:9/hook"}, format="json").json()
    subscription = WebhookSubscription.objects.get(pk=made["id"])
    assert made["secret"] == subscription.secret
    viewer = User.objects.create_user("viewer", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename__startswith="view_",
                                                          content_type__app_label="memory_engine"))
    project.members.add(viewer)
    admin = Client()
    admin.force_login(viewer)
    page = admin.get(f"/admin/memory_engine/webhooksubscription/{subscription.pk}/change/")
    assert page.status_code == 200 and subscription.secret.encode() not in page.content
    assert subscription.secret not in world["all"].get(f"/api/v1/webhooks/{subscription.pk}").content.decode()
    rotated = world["all"].post(f"/api/v1/webhooks/{subscription.pk}/rotate-secret").json()
    assert rotated["secret"] != made["secret"]
    assert WebhookSubscription.objects.get(pk=subscription.pk).secret == rotated["secret"]
    # narrowed keys neither see nor rotate it: for them it does not exist
    assert world["a"].post(f"/api/v1/webhooks/{subscription.pk}/rotate-secret").status_code == 404


def test_receipts_keep_a_keyed_hmac_and_only_purgers_list_them(world: dict[str, Any], project: Any) -> None:
    selector = {"subject_external_id": "bob"}
    receipt = world["all"].post("/api/v1/erasure", selector, format="json").json()
    plain = hashlib.sha256(json.dumps(selector, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert receipt["selector_hmac"] != plain and plain not in json.dumps(receipt)
    from memory_engine.services.erasure import selector_hmac

    assert receipt["selector_hmac"] == selector_hmac(selector)
    assert [r["id"] for r in world["all"].get("/api/v1/erasure-receipts").json()["results"]] == [receipt["id"]]
    reader = api_client(_key(project, read_only=True)[0])
    assert reader.get("/api/v1/erasure-receipts").json()["results"] == []
    assert reader.get(f"/api/v1/erasure-receipts/{receipt['id']}").status_code == 404
    assert world["a"].get("/api/v1/erasure-receipts").json()["results"] == []
    own = world["a"].post("/api/v1/erasure", {"tags": {"case": "none"}}, format="json").json()
    assert [r["id"] for r in world["a"].get("/api/v1/erasure-receipts").json()["results"]] == [own["id"]]
    assert ErasureReceipt.objects.filter(project=project).count() == 2


def test_a_receipts_digest_is_keyed_and_confirms_no_guessed_text(project: Any, client: Any, settings: Any) -> None:
    """The receipt's ``sha256`` over the removed rows is an HMAC under the receipt key: the plain
    sha256 of ``table \\t id \\t sha256(text)`` lines (ids the receipt lists, a guessed text) does not
    match it; the same lines under the key do."""
    import hmac

    text = "Hieronymus Bellweather takes insulin."
    store = MemoryStoreFactory(project=project)
    written = memory_write(store=store, content=text, principal="test", tags={"erase": "me"})
    receipt = client.post("/api/v1/erasure", {"tags": {"erase": "me"}}, format="json").json()
    ids = receipt["ids"]
    assert ids["memory"] == [written.memory.pk] and ids["memoryassertion"] == [written.assertion.pk]
    guessed = hashlib.sha256(text.encode()).hexdigest()
    lines = sorted((table, row_id, guessed) for table in ("memory", "memorycontent", "memoryassertion")
                   for row_id in ids[table])
    message = "".join("\t".join(line) + "\n" for line in lines).encode()
    assert receipt["sha256"] != hashlib.sha256(message).hexdigest()
    key = hashlib.sha256(f"memory_engine.erasure-receipt:{settings.SECRET_KEY}".encode()).digest()
    assert receipt["sha256"] == hmac.new(key, message, hashlib.sha256).hexdigest()


def test_another_teams_path_answers_a_conflict_that_names_nothing(world: dict[str, Any], project: Any) -> None:
    theirs = _tagged(make_document(project, "/b/secret-plan.txt", ["Team b's plan."]), "team:b")
    taken = world["a"].post("/api/v1/documents", {"content": "mine", "path": theirs.path}, format="json")
    assert (taken.status_code, taken.json()["code"]) == (409, "PATH_TAKEN")
    assert taken.json()["details"] == {"path": theirs.path}
    assert theirs.pk not in taken.content.decode()
    own = world["a"].post("/api/v1/documents", {"content": "mine", "path": "/a/mine.txt"}, format="json")
    assert own.status_code in (201, 202)
    again = world["a"].post("/api/v1/documents", {"content": "mine", "path": "/a/mine.txt"}, format="json")
    assert {k: v for k, v in again.json().items() if k != "details"} == {
        k: v for k, v in taken.json().items() if k != "details"}


def test_ids_outside_the_grants_in_bodies_answer_like_unknown_ids(world: dict[str, Any], project: Any) -> None:
    theirs = _tagged(make_document(project, "/b/source.txt", ["Team b's source."]), "team:b")
    version = DocumentVersion.objects.filter(document=theirs).first()
    assert version is not None
    bodies = {"hidden": version.pk, "unknown": nonexistent_id(version.pk)}
    answers = {name: world["a"].post("/api/v1/documents", {"content": "derived", "path": f"/a/{name}.txt",
                                                           "derived_from": value}, format="json")
               for name, value in bodies.items()}
    assert {a.status_code for a in answers.values()} == {404}
    assert answers["hidden"].content.replace(bodies["hidden"].encode(), b"ID") == \
        answers["unknown"].content.replace(bodies["unknown"].encode(), b"ID")
    for field in ("memory_store_ids", "write_memory_store_id"):
        answers = {}
        for name, value in (("hidden", world["store_b"].pk), ("unknown", nonexistent_id(world["store_b"].pk))):
            config = {"knowledge_config": {"memory_store_ids": [value]}} if field == "memory_store_ids" else {
                "write_memory_store_id": value}
            answers[name] = world["a"].post("/api/v1/agents", {"name": f"agent-{field}-{name}", **config},
                                            format="json")
        assert answers["hidden"].status_code == answers["unknown"].status_code == 400
        assert answers["hidden"].json()["code"] == answers["unknown"].json()["code"] == "UNKNOWN_SCOPE"
    assert not Document.objects.filter(path__startswith="/a/hidden").exists()


@pytest.mark.django_db(transaction=True)
def test_concurrent_batches_into_new_stores_stop_at_the_project_quota(hashing_embedder: None) -> None:
    """Batch quota under concurrency: three 200-item batches into three new stores of one project
    at once (three clients, each on a connection of its own) create exactly ``max_memories``
    memories between them, the rest refused 429-style per item (QUOTA_EXCEEDED). The quota was
    counted under each store's lock only: each batch missed the others' uncommitted creates."""
    from tests.factories import ProjectFactory, make_key
    from tests.threads import at_once

    project = ProjectFactory(max_memories=250)
    client = api_client(make_key(project))
    stores = [client.post("/api/v1/memory-stores", {"name": f"burst-{n}"}, format="json").json()["id"]
              for n in range(3)]

    def batch(n: int) -> Any:
        # each item its own identifier (its own subject): none is a duplicate or an update of another
        items = [{"content": f"Ticket QZ-{n}{i:03d} was closed by the night shift."} for i in range(200)]
        body = {"memory_store_id": stores[n], "memories": items, "duplicate_threshold": 1.0,
                "supersede_threshold": 1.0}
        return api_client(make_key(project)).post("/api/v1/memories/batch", body, format="json")

    answers = at_once(batch, [0, 1, 2], timeout=300)
    assert {answer.status_code for answer in answers} <= {200, 201, 207}, [a.content[:200] for a in answers]
    results = [item for answer in answers for item in answer.json()["results"]]
    created = [item for item in results if item.get("action") == "created"]
    refused = [item["error"]["code"] for item in results if item.get("error")]
    assert len(created) == 250 and refused == ["QUOTA_EXCEEDED"] * 350
    assert Memory.objects.live().filter(store__project=project).count() == 250


def test_distiller_runs_name_no_version_or_memory_outside_the_readers_grants(world: dict[str, Any],
                                                                           project: Any) -> None:
    """Runs' error ids: a distiller of team a's store (no document filter: it reads team b's
    documents too) whose run failed on team b's version and memory lists, to team a's key, only the
    errors that name rows team a reaches; a key without grants sees them all."""
    from memory_engine.models import DistillerRun
    from memory_engine.policy import SYSTEM
    from memory_engine.services.distillers import distiller_create

    theirs = _tagged(make_document(project, "/b/secret-plan.md", ["Team b's plan."]), "team:b")
    ours = _tagged(make_document(project, "/a/plan.md", ["Team a's plan."]), "team:a")
    their_version = DocumentVersion.objects.get(document=theirs)
    our_version = DocumentVersion.objects.get(document=ours)
    distiller = distiller_create(store=world["store_a"], caller=SYSTEM)
    DistillerRun.objects.create(project=project, distiller=distiller, errors=[
        {"version_id": their_version.pk, "code": "LLM_FAILED", "message": "x"},
        {"version_id": our_version.pk, "code": "LLM_FAILED", "message": "y"},
        {"memory_id": world["secret"].pk, "code": "LEGAL_HOLD", "message": "z"}])
    for path in (f"/api/v1/distillers/{distiller.pk}/runs", f"/api/v1/distillers/{distiller.pk}"):
        answer = world["a"].get(path)
        assert answer.status_code == 200, answer.json()
        text = answer.content.decode()
        assert our_version.pk in text
        assert their_version.pk not in text and world["secret"].pk not in text
        everything = world["all"].get(path).content.decode()
        assert their_version.pk in everything and world["secret"].pk in everything
    # the admin's run inline, to a view-only staff user narrowed to team a
    from memory_engine.models import StaffGrants

    viewer = User.objects.create_user("viewer-a", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename__startswith="view_",
                                                          content_type__app_label="memory_engine"))
    StaffGrants.objects.create(user=viewer, grants=[{"pattern": "team:a", "actions": ["search"]}])
    project.members.add(viewer)
    admin = Client()
    admin.force_login(viewer)
    page = admin.get(f"/admin/memory_engine/distiller/{distiller.pk}/change/")
    assert page.status_code == 200
    assert our_version.pk.encode() in page.content
    assert their_version.pk.encode() not in page.content and world["secret"].pk.encode() not in page.content


def test_webhook_urls_reach_view_only_staff_without_their_query_string(world: dict[str, Any],
                                                                       project: Any) -> None:
    """A subscription's URL may carry a token (``?tok=``): a view-only staff user sees it without
    the query string on the change page and in the list (as rule handlers' URLs) and cannot
    search for the token; a user who may change subscriptions sees it whole."""
    url = "http://127.0.0.1:9/hook?tok=s3cr3t-t0ken"
    made = world["all"].post("/api/v1/webhooks", {"url": url}, format="json")
    assert made.status_code == 201, made.json()
    viewer = User.objects.create_user("hook-viewer", is_staff=True)
    viewer.user_permissions.set(Permission.objects.filter(codename__startswith="view_",
                                                          content_type__app_label="memory_engine"))
    editor = User.objects.create_user("hook-editor", is_staff=True)
    editor.user_permissions.set(Permission.objects.filter(content_type__app_label="memory_engine"))
    project.members.add(viewer, editor)
    base = "/admin/memory_engine/webhooksubscription/"
    pages = {}
    for user in (viewer, editor):
        admin = Client()
        admin.force_login(user)
        change = admin.get(f"{base}{made.json()['id']}/change/")
        listing = admin.get(base)
        search = admin.get(base, {"q": "s3cr3t"})
        assert change.status_code == listing.status_code == search.status_code == 200
        pages[user.username] = (change.content, listing.content, search.context["cl"].result_count)
    change, listing, found = pages["hook-viewer"]
    assert b"s3cr3t" not in change and b"s3cr3t" not in listing and found == 0
    assert b"http://127.0.0.1:9/hook" in change and b"http://127.0.0.1:9/hook" in listing
    change, listing, found = pages["hook-editor"]
    assert b"s3cr3t-t0ken" in change and b"s3cr3t" not in listing and found == 1


def test_an_agents_detail_names_no_store_or_document_outside_the_readers_grants(world: dict[str, Any],
                                                                                project: Any) -> None:
    """A shared agent (both teams reach it) that searches both teams' stores and documents and
    writes into team b's store: to team a's key (REST) and to a staff user narrowed to team a
    (the admin's list and change page) it names only team a's; a key without grants sees all."""
    from memory_engine.models import StaffGrants

    shared = world["shared"]
    theirs = _tagged(make_document(project, "/b/roadmap.md", ["Team b's roadmap."]), "team:b")
    ours = _tagged(make_document(project, "/a/roadmap.md", ["Team a's roadmap."]), "team:a")
    Agent.objects.filter(pk=shared.pk).update(knowledge_config={
        "memory_store_ids": [world["store_a"].pk, world["store_b"].pk], "document_ids": [ours.pk, theirs.pk]})
    hidden = (world["store_b"].pk, theirs.pk)
    for path in (f"/api/v1/agents/{shared.pk}", "/api/v1/agents"):
        answer = world["a"].get(path)
        assert answer.status_code == 200, answer.json()
        assert not [i for i in hidden if i in answer.content.decode()]
        assert world["store_a"].pk in answer.content.decode() and ours.pk in answer.content.decode()
        everything = world["all"].get(path).content.decode()
        assert all(i in everything for i in hidden)
    detail = world["a"].get(f"/api/v1/agents/{shared.pk}").json()
    assert detail["write_memory_store_id"] is None
    assert detail["knowledge_config"] == {"memory_store_ids": [world["store_a"].pk], "document_ids": [ours.pk]}

    staff = User.objects.create_user("agent-reader-a", is_staff=True)
    staff.user_permissions.set(Permission.objects.filter(content_type__app_label="memory_engine"))
    StaffGrants.objects.create(user=staff, grants=[{"pattern": "team:a", "actions": ALL}])
    project.members.add(staff)
    admin = Client()
    admin.force_login(staff)
    change = admin.get(f"/admin/memory_engine/agent/{shared.pk}/change/")
    assert change.status_code == 200 and world["store_a"].pk.encode() in change.content
    for page in (change, admin.get("/admin/memory_engine/agent/")):
        assert page.status_code == 200
        assert not [i for i in (*hidden, "store-b") if i.encode() in page.content]
    # saving the agent in the admin keeps what the user cannot see
    saved = admin.post(f"/admin/memory_engine/agent/{shared.pk}/change/", {"name": "shared", "project": project.pk})
    assert saved.status_code == 302, saved.context["adminform"].form.errors if saved.context else saved.content
    kept = Agent.objects.get(pk=shared.pk)
    assert kept.write_memory_store_id == world["store_b"].pk and world["store_b"].pk in kept.knowledge_config[
        "memory_store_ids"]


def test_an_entity_another_team_named_first_shows_a_narrowed_key_only_its_own_view(world: dict[str, Any],
                                                                                    project: Any,
                                                                                    settings: Any) -> None:
    """Team a's memories name "Hieronymus Bellweather, also known as H. B." first (merged with
    "Bellweather", "H. B." recorded as an alias); later team b's key writes "Bellweather called about
    the invoice", and its search hit hands it the entity's id. Team b then sees the entity by its own
    spelling, without team a's name and alias, dated by its own mention; ``q=`` on team a's alias or
    name finds nothing for it. Team a and a key without grants see the entity as it is."""
    from datetime import UTC, datetime

    from memory_engine.models import Entity, EntityEdge
    from memory_engine.services.entities import entities_extract_memories

    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "ENTITY_RESOLUTION_SIMILARITY": 0}
    theirs = [memory_write(store=world["store_a"], content=text, principal="test", mechanism="api").memory
              for text in ("Hieronymus Bellweather, also known as H. B., chairs the audit board.",
                           "Bellweather approved the audit budget.")]
    entities_extract_memories(memory_ids=[memory.pk for memory in theirs])
    full = Entity.objects.get(project=project, key="hieronymus bellweather")
    short = Entity.objects.get(project=project, key="bellweather")
    merged = world["all"].post(f"/api/v1/entities/{full.pk}/merge", {"entity_ids": [short.pk]}, format="json")
    assert merged.status_code == 200 and merged.json()["aliases"] == ["bellweather"], merged.json()
    earlier = datetime(2024, 1, 2, tzinfo=UTC)  # team a's mentions were recorded long before team b's
    Entity.objects.filter(pk=full.pk).update(aliases=["bellweather", "h. b"], created_at=earlier, updated_at=earlier)
    EntityEdge.objects.filter(entity=full).update(created_at=earlier)

    written = world["b"].post("/api/v1/memories", {"memory_store_id": world["store_b"].pk,
                                                   "content": "Bellweather called about the invoice."}, format="json")
    assert written.status_code == 201, written.json()
    entities_extract_memories(memory_ids=[written.json()["id"]])
    found = world["b"].post("/api/v1/knowledge/search", {"query": "Bellweather invoice",
                                                         "memory_store_ids": [world["store_b"].pk]}, format="json")
    assert found.status_code == 200, found.json()
    hit = next(hit for hit in found.json()["results"] if hit["id"] == written.json()["id"])
    assert full.pk in hit["entity_ids"]

    detail = world["b"].get(f"/api/v1/entities/{full.pk}")
    assert detail.status_code == 200, detail.json()
    body = detail.json()
    assert (body["name"], body["key"], body["aliases"]) == ("Bellweather", "bellweather", [])
    assert datetime.fromisoformat(body["created_at"]) > earlier and datetime.fromisoformat(body["updated_at"]) > earlier
    assert [memory["id"] for memory in body["memories"]] == [written.json()["id"]]
    text = detail.content.decode().lower()
    assert "hieronymus" not in text and "h. b" not in text and "2024-01-02" not in text
    for q in ("H. B.", "Hieronymus", "hieronymus bellweather"):
        listed = world["b"].get("/api/v1/entities", {"q": q})
        assert listed.status_code == 200 and listed.json()["count"] == 0, (q, listed.json())
    listed = world["b"].get("/api/v1/entities", {"q": "bellweather"}).json()
    assert [(row["id"], row["name"], row["aliases"]) for row in listed["results"]] == [(full.pk, "Bellweather", [])]

    # team a (whose text spells both) and a key without grants see the entity as it is
    for who in ("a", "all"):
        seen = world[who].get(f"/api/v1/entities/{full.pk}").json()
        assert (seen["name"], seen["key"], seen["aliases"]) == ("Hieronymus Bellweather", "hieronymus bellweather",
                                                                ["bellweather", "h. b"]), (who, seen)
        assert datetime.fromisoformat(seen["created_at"]) == earlier
        assert [row["id"] for row in world[who].get("/api/v1/entities", {"q": "H. B."}).json()["results"]] == [full.pk]
