"""The memory REST API: wire shapes, errors with codes, tenancy and auth."""

from __future__ import annotations

import json

import pytest
from django.utils import timezone

from memory_engine.models import ApiKey, Memory, MemoryAssertion, MemoryStore
from tests.conftest import api_client
from tests.factories import MemoryStoreFactory, make_key

pytestmark = pytest.mark.django_db


def create_store(client, **body):
    response = client.post("/api/v1/memory-stores", {"name": "facts", **body}, format="json")
    assert response.status_code == 201, response.json()
    return response.json()


def post_memory(client, store_id, content, **body):
    return client.post("/api/v1/memories", {"memory_store_id": store_id, "content": content, **body},
                       format="json")


def test_store_crud_and_thresholds(client):
    store = create_store(client, description="d", tags={"team": "a"}, duplicate_threshold=0.97,
                         supersede_threshold=0.92)
    assert store["id"].startswith("ms_")
    assert store["duplicate_threshold"] == 0.97
    listed = client.get("/api/v1/memory-stores").json()
    assert listed["count"] == 1 and listed["results"][0]["name"] == "facts"
    patched = client.patch(f"/api/v1/memory-stores/{store['id']}", {"supersede_threshold": 0.99}, format="json")
    assert patched.status_code == 400 and patched.json()["code"] == "THRESHOLDS_INVALID"
    taken = client.post("/api/v1/memory-stores", {"name": "facts"}, format="json")
    assert taken.status_code == 409 and taken.json()["code"] == "NAME_TAKEN"
    assert client.delete(f"/api/v1/memory-stores/{store['id']}").status_code == 204


def test_store_rename_checks_the_name_but_not_against_itself(client, other_client):
    first, second = create_store(client), create_store(client, name="notes")
    taken = client.patch(f"/api/v1/memory-stores/{second['id']}", {"name": "facts"}, format="json")
    assert taken.status_code == 409 and taken.json()["code"] == "NAME_TAKEN"
    assert taken.json()["details"] == {"name": "facts"}
    same = client.put(f"/api/v1/memory-stores/{first['id']}", {"name": "facts", "description": "kept"},
                      format="json")
    assert same.status_code == 200 and same.json()["description"] == "kept"
    assert same.json()["valid_memories"] == 0
    assert create_store(other_client)["name"] == "facts"  # names are unique per project only


def test_write_answers_created_skipped_superseded(client):
    store = create_store(client)
    created = post_memory(client, store["id"], "Our main database is hosted in Frankfurt", tags={"env": "prod"})
    assert created.status_code == 201
    body = created.json()
    assert body["action"] == "created" and body["id"].startswith("mem_")
    for key in ("memory_store_id", "content", "tags", "metadata", "source_type", "created_at",
                "invalidated_at", "superseded_by_memory_id", "similarity"):
        assert key in body
    skipped = post_memory(client, store["id"], "Our main database is hosted in Frankfurt ")
    assert skipped.status_code == 200 and skipped.json()["action"] == "skipped"
    assert skipped.json()["id"] == body["id"]
    superseded = post_memory(client, store["id"], "Our main database is now hosted in Frankfurt and Paris",
                             conversation_id="conv-1")
    assert superseded.status_code == 201
    new = superseded.json()
    assert new["action"] == "superseded" and new["source_type"] == "conversation"
    assert new["metadata"]["conversation_id"] == "conv-1" and new["tags"] == {"env": "prod"}
    assert new["superseded_memory_id"] == body["id"]

    old = client.get(f"/api/v1/memories/{body['id']}").json()
    assert old["invalidated_at"] is not None and old["superseded_by_memory_id"] == new["id"]
    valid = client.get(f"/api/v1/memories?memory_store_id={store['id']}").json()
    assert [m["id"] for m in valid["results"]] == [new["id"]]
    everything = client.get(f"/api/v1/memories?memory_store_id={store['id']}&include_invalidated=true").json()
    assert everything["count"] == 2

    ledger = client.get(f"/api/v1/memory-assertions?memory_store_id={store['id']}").json()
    assert [a["outcome"] for a in ledger["results"]] == ["created", "skipped", "superseded"]
    assert all(a["principal"].startswith("key:key_") and a["mechanism"] == "api" for a in ledger["results"])
    only_skips = client.get("/api/v1/memory-assertions?outcome=skipped").json()
    assert only_skips["count"] == 1
    per_memory = client.get(f"/api/v1/memories/{body['id']}/assertions").json()
    assert {a["outcome"] for a in per_memory["results"]} == {"created", "skipped", "superseded"}


def test_a_to_b_to_c_supersede_chain(client):
    """Three writes about one key: each retires the one before; only the last is valid, listed
    and searchable, every link is readable from both ends, and the tags ride along."""
    store = create_store(client)
    city = {"kind": "profile", "key": "city"}
    a = post_memory(client, store["id"], "The user lives in Paris.", about=city, tags={"source": "chat"}).json()
    b = post_memory(client, store["id"], "The user lives in Berlin.", about=city).json()
    c = post_memory(client, store["id"], "The user lives in Rome.", about=city).json()
    assert [m["action"] for m in (a, b, c)] == ["created", "superseded", "superseded"]
    assert (b["superseded_memory_id"], c["superseded_memory_id"]) == (a["id"], b["id"])
    assert b["tags"] == c["tags"] == {"source": "chat"}  # inherited from the retired memory
    read = {m["id"]: client.get(f"/api/v1/memories/{m['id']}").json() for m in (a, b, c)}
    assert read[a["id"]]["superseded_by_memory_id"] == b["id"] and read[a["id"]]["invalidated_at"]
    assert read[b["id"]]["superseded_by_memory_id"] == c["id"] and read[b["id"]]["invalidated_at"]
    assert read[c["id"]]["superseded_by_memory_id"] is None and read[c["id"]]["invalidated_at"] is None
    valid = client.get(f"/api/v1/memories?memory_store_id={store['id']}").json()
    assert [m["id"] for m in valid["results"]] == [c["id"]]
    everything = client.get(f"/api/v1/memories?memory_store_id={store['id']}&include_invalidated=true").json()
    assert {m["id"] for m in everything["results"]} == {a["id"], b["id"], c["id"]}
    ledger = client.get(f"/api/v1/memory-assertions?memory_store_id={store['id']}").json()["results"]
    assert [(x["outcome"], x["memory_id"], x["replaced_memory_id"]) for x in ledger] == [
        ("created", a["id"], None), ("superseded", b["id"], a["id"]), ("superseded", c["id"], b["id"])]
    for query in ("Paris", "Berlin", "which city does the user live in"):
        found = client.post("/api/v1/knowledge/search", {"query": query, "memory_store_ids": [store["id"]]},
                            format="json").json()["results"]
        assert [hit["id"] for hit in found] == [c["id"]], query


def test_forget(client):
    store = create_store(client)
    memory = post_memory(client, store["id"], "The office closes at 6pm").json()
    assert client.delete(f"/api/v1/memories/{memory['id']}").status_code == 204
    assert client.get(f"/api/v1/memories/{memory['id']}").json()["invalidated_at"] is not None
    outcomes = [a["outcome"] for a in client.get(f"/api/v1/memories/{memory['id']}/assertions").json()["results"]]
    assert outcomes == ["created", "forgotten"]


def test_tags_filter(client):
    store = create_store(client, tags={"team": "core"})
    post_memory(client, store["id"], "The office closes at 6pm", tags={"topic": "hours"})
    post_memory(client, store["id"], "Invoices are sent on the first of the month", tags={"topic": "billing"})
    hours = client.get('/api/v1/memories?tags={"topic":"hours"}').json()
    assert hours["count"] == 1
    by_store_tag = client.get('/api/v1/memories?tags={"team":"core"}').json()
    assert by_store_tag["count"] == 2
    bad = client.get("/api/v1/memories?tags=notjson")
    assert bad.status_code == 400 and bad.json()["code"] == "VALIDATION_ERROR"


@pytest.mark.parametrize(
    "body,code",
    [
        ({"content": ""}, "CONTENT_EMPTY"),
        ({"content": "   \n"}, "CONTENT_EMPTY"),
        ({"content": "x" * 40000}, "CONTENT_TOO_LONG"),
        ({"content": "ok", "duplicate_threshold": 1.5}, "THRESHOLDS_INVALID"),
        ({"content": "ok", "duplicate_threshold": 0.8, "supersede_threshold": 0.9}, "THRESHOLDS_INVALID"),
        ({"content": "a\x00b"}, "VALIDATION_ERROR"),
        ({"content": 12}, "VALIDATION_ERROR"),
        ({"content": "ok", "tags": ["not", "an", "object"]}, "VALIDATION_ERROR"),
    ],
)
def test_bad_writes_answer_400_with_code_and_write_nothing(client, body, code):
    store = create_store(client)
    response = client.post("/api/v1/memories", {"memory_store_id": store["id"], **body}, format="json")
    assert response.status_code == 400, response.json()
    assert response.json()["code"] == code and response.json()["message"]
    assert not MemoryAssertion.objects.exists()


def test_malformed_json(client):
    response = client.post("/api/v1/memories", data="{not json", content_type="application/json")
    assert response.status_code == 400 and response.json()["code"] == "MALFORMED_REQUEST"


def test_unknown_store(client):
    response = post_memory(client, "ms_doesnotexist", "hello")
    assert response.status_code == 400 and response.json()["code"] == "UNKNOWN_SCOPE"
    assert response.json()["details"] == {"memory_store_id": ["ms_doesnotexist"]}


def test_missing_invalid_revoked_and_expired_keys(project):
    assert api_client().get("/api/v1/memories").status_code == 401
    assert api_client("me_nope_nope").get("/api/v1/memories").json()["code"] == "AUTHENTICATION_FAILED"
    raw = make_key(project)
    assert api_client(raw).get("/api/v1/memories").status_code == 200
    ApiKey.objects.filter(project=project).update(revoked_at=timezone.now())
    response = api_client(raw).get("/api/v1/memories")
    assert response.status_code == 401 and response.json()["code"] == "AUTHENTICATION_FAILED"
    expired = make_key(project)
    ApiKey.objects.filter(revoked_at__isnull=True).update(expires_at=timezone.now())
    assert api_client(expired).get("/api/v1/memories").status_code == 401


def test_keys_are_stored_hashed(project):
    raw = make_key(project)
    key = ApiKey.objects.get(project=project)
    secret = raw.split("_", 2)[2]  # me_<prefix>_<secret>; the secret itself may start with "_"
    assert raw not in (key.hashed_key, key.prefix) and secret not in key.hashed_key
    assert key.matches(raw)


def test_read_only_key_reads_but_cannot_write(client, readonly_client):
    store = create_store(client)
    assert readonly_client.get("/api/v1/memories").status_code == 200
    response = post_memory(readonly_client, store["id"], "hello")
    assert response.status_code == 403 and response.json()["code"] == "READ_ONLY_KEY"
    assert not Memory.objects.exists() and not MemoryAssertion.objects.exists()
    assert readonly_client.post("/api/v1/embeddings", {"input": "hi"}, format="json").status_code == 200


def test_other_projects_rows_answer_404(client, other_client, other_project):
    store = create_store(client)
    memory = post_memory(client, store["id"], "The office closes at 6pm").json()
    assertion_id = MemoryAssertion.objects.get().pk
    for url in (f"/api/v1/memory-stores/{store['id']}", f"/api/v1/memories/{memory['id']}",
                f"/api/v1/memories/{memory['id']}/assertions", f"/api/v1/memory-assertions/{assertion_id}"):
        assert client.get(url).status_code == 200
        response = other_client.get(url)
        assert response.status_code == 404 and response.json()["code"] == "NOT_FOUND", url
    assert other_client.delete(f"/api/v1/memories/{memory['id']}").status_code == 404
    assert other_client.patch(f"/api/v1/memory-stores/{store['id']}", {"name": "x"}, format="json").status_code == 404
    assert other_client.delete(f"/api/v1/memory-stores/{store['id']}").status_code == 404
    response = post_memory(other_client, store["id"], "sneaky")
    assert response.status_code == 400 and response.json()["code"] == "UNKNOWN_SCOPE"
    # none of the refused calls changed a row: the memory is live, the store as it was, no new write
    assert Memory.objects.live().filter(pk=memory["id"]).exists()
    assert MemoryStore.objects.get(pk=store["id"]).name == store["name"]
    assert list(MemoryAssertion.objects.values_list("pk", flat=True)) == [assertion_id]
    # lists never show or count the other project's rows; a filter naming one answers as for an unknown id
    for url in ("/api/v1/memory-stores", "/api/v1/memories", "/api/v1/memory-assertions"):
        assert other_client.get(url).json()["count"] == 0, url
    for url in (f"/api/v1/memories?memory_store_id={store['id']}",
                f"/api/v1/memory-assertions?memory_store_id={store['id']}"):
        response = other_client.get(url)
        assert (response.status_code, response.json()["code"]) == (400, "UNKNOWN_SCOPE"), url
    MemoryStoreFactory(project=other_project, name="facts")  # same name in another project is fine


def test_embeddings_endpoint(client):
    response = client.post("/api/v1/embeddings", {"input": ["one", "two"]}, format="json")
    body = response.json()
    assert response.status_code == 200 and body["model"] == "all-MiniLM-L6-v2"
    assert [d["index"] for d in body["data"]] == [0, 1] and len(body["data"][0]["embedding"]) == 384
    bad = client.post("/api/v1/embeddings", {"input": []}, format="json")
    assert bad.status_code == 400 and bad.json()["code"] == "VALIDATION_ERROR"


def test_embeddings_without_provider_is_503(client, no_embedder):
    response = client.post("/api/v1/embeddings", {"input": "x"}, format="json")
    assert response.status_code == 503 and response.json()["code"] == "EMBEDDING_NOT_CONFIGURED"


def test_staff_session_names_its_project(project, admin_user):
    from rest_framework.test import APIClient

    client = APIClient()
    client.force_authenticate(admin_user)
    assert client.get("/api/v1/memories").json()["code"] == "PROJECT_REQUIRED"
    assert client.get(f"/api/v1/memories?project_id={project.pk}").status_code == 200
    assert client.get("/api/v1/memories", HTTP_X_PROJECT_ID=project.pk).status_code == 200


def test_openapi_schema_is_served(client):
    response = client.get("/api/schema/?format=json")
    assert response.status_code == 200
    paths = response.json()["paths"]
    assert "/api/v1/memories" in paths and "/api/v1/memory-assertions" in paths


def test_text_without_meaning_is_stored_without_a_vector(client, hashing_embedder):
    """A provider may embed a text with no words to a zero vector (cosine undefined): it is
    stored without one, and no NaN reaches the JSON answer."""
    store = create_store(client)
    first = post_memory(client, store["id"], "\u0004\U000ea801")
    assert first.status_code == 201 and first.json()["similarity"] is None
    assert MemoryAssertion.objects.get().details["embedding"] == "embedding_empty"
    second = post_memory(client, store["id"], "\u0005\U000ea802")
    assert second.status_code == 201, second.json()


def test_an_unknown_store_answers_alike_on_write_batch_search_and_filter(client, other_client):
    """One answer for a store id a request refers to, whatever the door: 400 UNKNOWN_SCOPE naming it
    (another project's id answers the same); only an id in the path is 404."""
    foreign = create_store(other_client)["id"]
    for store_id in ("ms_doesnotexist", foreign):
        answers = {
            "write": post_memory(client, store_id, "hello"),
            "batch": client.post("/api/v1/memories/batch", {"memory_store_id": store_id,
                                                            "memories": [{"content": "hello"}]}, format="json"),
            "search": client.post("/api/v1/knowledge/search", {"query": "hello", "memory_store_ids": [store_id]},
                                  format="json"),
            "list": client.get("/api/v1/memories", {"memory_store_id": store_id}),
            "ledger": client.get("/api/v1/memory-assertions", {"memory_store_id": store_id}),
        }
        for door, answer in answers.items():
            body = answer.json()
            assert (answer.status_code, body["code"]) == (400, "UNKNOWN_SCOPE"), (door, body)
            assert store_id in body["message"] and store_id in str(body["details"]), (door, body)
        assert client.get(f"/api/v1/memory-stores/{store_id}").status_code == 404
    assert not Memory.objects.exists()


def test_a_key_without_bearer_is_told_how_to_send_it(project):
    raw = make_key(project)
    for header in (raw, f"Token {raw}"):
        client = api_client()
        client.credentials(HTTP_AUTHORIZATION=header)
        answer = client.get("/api/v1/memories")
        body = answer.json()
        assert (answer.status_code, body["code"]) == (401, "AUTHENTICATION_REQUIRED"), body
        assert "Authorization: Bearer <key>" in body["message"] and "Bearer scheme" in body["message"], body
        assert raw not in answer.content.decode()  # the key is never echoed
    nothing = api_client().get("/api/v1/memories").json()
    assert nothing["code"] == "AUTHENTICATION_REQUIRED" and "`Authorization: Bearer <key>`" in nothing["message"]


def test_json_sent_without_its_content_type_is_named_as_such(client):
    store = create_store(client)
    body = json.dumps({"memory_store_id": store["id"], "content": "The VPN rotates keys on Mondays."})
    for path in ("/api/v1/memories", "/api/v1/knowledge/search", "/api/v1/memory-stores"):
        # curl -d '{…}' without -H 'Content-Type: application/json'
        answer = client.generic("POST", path, body, content_type="application/x-www-form-urlencoded")
        got = answer.json()
        assert (answer.status_code, got["code"]) == (400, "JSON_SENT_AS_FORM"), (path, got)
        assert "Content-Type: application/json" in got["message"], got
    assert not Memory.objects.exists()
    # a real form body is still read as one
    form = client.post("/api/v1/memories", {"memory_store_id": store["id"], "content": "Form text."})
    assert form.status_code == 201, form.json()


def test_unknown_field_suggests_the_nearest_and_hides_the_csrf_field(client):
    store = create_store(client)
    answer = client.post("/api/v1/knowledge/search", {"query": "x", "memory_store_id": [store["id"]]}, format="json")
    body = answer.json()
    assert (answer.status_code, body["code"]) == (400, "UNKNOWN_FIELD"), body
    assert "did you mean `memory_store_ids`?" in body["message"], body
    assert body["details"]["fields"] == ["memory_store_id"]
    assert body["details"]["suggestions"] == {"memory_store_id": "memory_store_ids"}
    assert "csrfmiddlewaretoken" not in body["message"]
    far = post_memory(client, store["id"], "x", colour="red").json()
    assert far["code"] == "UNKNOWN_FIELD" and "suggestions" not in far["details"]
    assert "did you mean" not in far["message"]
    # a browser form's CSRF field is still accepted
    form = client.post("/api/v1/memories", {"memory_store_id": store["id"], "content": "Form text.",
                                            "csrfmiddlewaretoken": "t"})
    assert form.status_code == 201, form.json()


def test_blank_list_filters_are_refused_not_ignored(client):
    store = create_store(client)
    post_memory(client, store["id"], "The staging database runs PostgreSQL 16 on db-stage-2.")
    for path, param in (("/api/v1/memory-assertions", "memory_store_id"), ("/api/v1/memory-assertions", "memory_id"),
                        ("/api/v1/memory-assertions", "generation_id"), ("/api/v1/memories", "memory_store_id"),
                        ("/api/v1/generations", "agent_id"), ("/api/v1/memory-stores", "name")):
        answer = client.get(f"{path}?{param}=")
        body = answer.json()
        assert (answer.status_code, body["code"]) == (400, "VALIDATION_ERROR"), (path, param, body)
        assert param in body["message"] and param in body["details"]["fields"], body
    assert client.get("/api/v1/memory-assertions").json()["count"] == 1  # absent: no filter


def test_a_store_is_found_by_name(client, other_client):
    store = create_store(client, name="infra")
    create_store(client, name="infra-2")
    create_store(other_client, name="infra")
    found = client.get("/api/v1/memory-stores", {"name": "infra"}).json()
    assert [row["id"] for row in found["results"]] == [store["id"]]
    assert client.get("/api/v1/memory-stores", {"name": "nope"}).json()["count"] == 0


@pytest.mark.parametrize("expires_at", ["2030-01-01 00:00", "2030-01-01T00:00:00"])
def test_expires_at_without_a_time_zone_is_refused(client, expires_at):
    store = create_store(client)
    doors = {
        "write": lambda: post_memory(client, store["id"], "The badge reader is replaced.", expires_at=expires_at),
        "batch": lambda: client.post("/api/v1/memories/batch", {"memory_store_id": store["id"], "memories": [
            {"content": "The badge reader is replaced.", "expires_at": expires_at}]}, format="json"),
    }
    answer = doors["write"]()
    body = answer.json()
    assert (answer.status_code, body["code"]) == (400, "EXPIRES_AT_INVALID"), body
    assert "no time zone" in body["message"] and "2030-01-01T00:00:00Z" in body["message"], body
    batch = doors["batch"]().json()
    assert batch["results"][0]["error"]["code"] == "EXPIRES_AT_INVALID", batch
    assert not Memory.objects.exists()
    aware = post_memory(client, store["id"], "The badge reader is replaced.", expires_at=expires_at + "+02:00")
    assert aware.status_code == 201, aware.json()
