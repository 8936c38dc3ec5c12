"""The operator console through Django's test client: every view and action, permissions,
and no cross-project leak to a staff member of one project."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from memory_engine.models import ApiKey, Document, Memory, MemoryAssertion, MemoryContent, Project

from .conftest import World, staff_user

A = "/admin/memory_engine"

CHANGELISTS = ["project", "memorystore", "memory", "memoryassertion", "document", "ingestionrule", "generation",
               "memoryrule", "agent", "apikey"]


def text(response: Any) -> str:
    return response.content.decode()


def projects_listed(response: Any) -> set[str]:
    """The projects a changelist's rows (all pages, not only the first) belong to."""
    changelist = response.context["cl"]
    return set(changelist.queryset.values_list(changelist.model_admin.project_path, flat=True))


# --------------------------------------------------------------------------- scoping


@pytest.mark.parametrize("model", CHANGELISTS)
def test_member_changelists_show_only_their_project(member_client: Client, mine: World, theirs: World,
                                                    model: str) -> None:
    response = member_client.get(f"{A}/{model}/")
    assert response.status_code == 200
    assert "zetamark" not in text(response) and "theirs-project" not in text(response)
    assert projects_listed(response) == {mine.project.pk}


@pytest.mark.parametrize("model", CHANGELISTS)
def test_superuser_sees_every_project(superuser_client: Client, mine: World, theirs: World, model: str) -> None:
    response = superuser_client.get(f"{A}/{model}/")
    assert response.status_code == 200
    assert projects_listed(response) == {mine.project.pk, theirs.project.pk}


def test_member_cannot_open_another_projects_rows(member_client: Client, theirs: World) -> None:
    for model, obj in [("project", theirs.project), ("memorystore", theirs.store), ("memory", theirs.old),
                       ("document", theirs.ready), ("memoryrule", theirs.rule), ("generation", theirs.generation),
                       ("ingestionrule", theirs.ingestion_rule), ("agent", theirs.agent)]:
        response = member_client.get(f"{A}/{model}/{obj.pk}/change/")
        assert response.status_code == 302, model  # the stock "does not exist" redirect
    assertion = MemoryAssertion.objects.filter(store=theirs.store).first()
    assert member_client.get(f"{A}/memoryassertion/{assertion.pk}/change/").status_code == 302


def test_filter_choices_and_form_choices_are_scoped(member_client: Client, mine: World, theirs: World) -> None:
    for url in [f"{A}/memory/", f"{A}/memoryassertion/", f"{A}/document/", f"{A}/memory/superseded/",
                f"{A}/apikey/add/", f"{A}/document/add/", f"{A}/memoryrule/add/",
                f"{A}/agent/{mine.agent.pk}/change/"]:
        body = text(member_client.get(url))
        assert "zetamark" not in body and "theirs-project" not in body, url
    assert "alphamark-store" in text(member_client.get(f"{A}/memory/"))


def test_autocomplete_is_scoped(member_client: Client, mine: World, theirs: World) -> None:
    response = member_client.get("/admin/autocomplete/", {"app_label": "memory_engine", "model_name": "agent",
                                                          "field_name": "write_memory_store", "term": ""})
    assert response.status_code == 200
    ids = {r["id"] for r in response.json()["results"]}
    assert mine.store.pk in ids and theirs.store.pk not in ids


def test_member_cannot_assign_another_projects_store(member_client: Client, mine: World, theirs: World) -> None:
    response = member_client.post(f"{A}/agent/{mine.agent.pk}/change/", {
        "name": "x", "project": mine.project.pk, "knowledge_config": "{}", "write_memory_store": theirs.store.pk})
    assert response.status_code == 200 and "Select a valid choice" in text(response)


def test_custom_views_are_scoped(member_client: Client, mine: World, theirs: World) -> None:
    assert member_client.get(f"{A}/project/{mine.project.pk}/overview/").status_code == 200
    assert member_client.get(f"{A}/project/{theirs.project.pk}/overview/").status_code == 404
    assert member_client.get(f"{A}/memoryrule/{theirs.rule.pk}/dry-run/").status_code == 404
    response = member_client.get(f"{A}/project/playground/", {"project": theirs.project.pk, "query": "office"})
    assert response.status_code == 200 and "Select a valid choice" in text(response)
    assert "zetamark" not in text(response)
    response = member_client.get(f"{A}/ingestionrule/tester/", {"project": theirs.project.pk,
                                                               "content_type": "application/pdf"})
    assert "Select a valid choice" in text(response) and "zetamark" not in text(response)
    home = member_client.get(f"{A}/")
    assert home.status_code == 200 and "Operator console" in text(home)


def test_custom_views_need_model_permissions(mine: World) -> None:
    user = staff_user("viewer", codenames=["view_project"])
    mine.project.members.add(user)
    client = Client()
    client.force_login(user)
    assert client.get(f"{A}/project/{mine.project.pk}/overview/").status_code == 200
    assert client.get(f"{A}/project/playground/").status_code == 403
    assert client.get(f"{A}/ingestionrule/tester/").status_code == 403
    assert client.get(f"{A}/memoryrule/{mine.rule.pk}/dry-run/").status_code == 403
    assert client.get(f"{A}/memory/superseded/").status_code == 403
    assert client.get(f"{A}/memory/").status_code == 403


def test_anonymous_is_sent_to_login(db: Any) -> None:
    response = Client().get(f"{A}/project/playground/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]


def test_staff_without_membership_sees_nothing(mine: World, theirs: World) -> None:
    client = Client()
    client.force_login(staff_user("outsider"))
    assert client.get(f"{A}/memory/").context["cl"].result_count == 0
    assert client.get(f"{A}/project/{mine.project.pk}/overview/").status_code == 404


# --------------------------------------------------------------------------- views


def test_overview(member_client: Client, mine: World) -> None:
    response = member_client.get(f"{A}/project/{mine.project.pk}/overview/")
    body = text(response)
    assert "alphamark-store" in body
    ctx = response.context
    assert ctx["stores"][0].valid == 1 and ctx["stores"][0].invalidated == 1
    assert dict(ctx["by_outcome"])["superseded"] == 1 and dict(ctx["by_outcome"])["created"] == 1
    assert dict(ctx["by_door"])["api"] == 2
    assert dict(ctx["by_status"]) == {"failed": 1, "processing": 0, "pending": 0, "ready": 1}
    assert ctx["by_status"][0][0] == "failed"  # failed first
    assert "NO_TEXT_LAYER" in body and "OCR converter" in body  # the failure with what to do next
    assert "LLM_NOT_CONFIGURED" in body and mine.generation.pk in body
    assert ctx["memories_missing_vector"] == 0 and ctx["chunks_missing_vector"] == 0


def test_memory_timeline(member_client: Client, mine: World) -> None:
    response = member_client.get(f"{A}/memory/{mine.new.pk}/change/")
    assert response.status_code == 200
    body = text(response)
    assert "Supersede chain (2 versions" in body
    chain = body[body.index("Supersede chain"):]
    assert chain.index("lives in Paris") < chain.index("lives in Berlin")  # oldest first
    entries = response.context["timeline"]
    assert [e["memory"].pk for e in entries] == [mine.old.pk, mine.new.pk]
    made = entries[1]["assertion"]
    assert (made.outcome, made.decision_reason, made.replaced_memory_id) == ("superseded", "about_key", mine.old.pk)
    for expected in ["about_key", "key:alphamark", "door <b>api</b>", made.pk]:
        assert expected in body
    # the retired version's page shows the same chain
    old = member_client.get(f"{A}/memory/{mine.old.pk}/change/")
    assert [e["memory"].pk for e in old.context["timeline"]] == [mine.old.pk, mine.new.pk]


def test_memory_page_puts_the_why_before_its_fields(member_client: Client, mine: World) -> None:
    """The decision (what replaced it, what it replaced, reason, similarity, door) and the chain come
    first, above the read-only fields."""
    retiring = MemoryAssertion.objects.get(replaced_memory=mine.old, outcome="superseded")
    old = text(member_client.get(f"{A}/memory/{mine.old.pk}/change/"))
    why = old[old.index('id="memory-why"'):old.index('id="supersede-timeline"')]
    assert "retired: superseded" in why and "replaced by" in why and mine.new.pk in why
    assert "lives in Berlin" in why and "reason <b>about_key</b>" in why
    assert f"similarity <b>{retiring.similarity:.3f}</b>" in why and "door <b>api</b>" in why
    assert old.index('id="supersede-timeline"') < old.index('field-id"') < old.index('field-kind"')
    new = text(member_client.get(f"{A}/memory/{mine.new.pk}/change/"))
    why = new[new.index('id="memory-why"'):new.index('id="supersede-timeline"')]
    assert "made: superseded" in why and mine.old.pk in why and "lives in Paris" in why
    assert "nothing has replaced or forgotten it" in why
    assert new.index('id="memory-why"') < new.index('field-id"')


def test_memory_timeline_lists_content_sharers(member_client: Client, mine: World) -> None:
    from memory_engine.services.memories import memory_write

    # "Paris" again, about another key: the same content row, a second memory
    again = memory_write(store=mine.store, content="The user alphamark lives in Paris.", principal="p",
                         about={"kind": "profile", "key": "birthplace"})
    assert again.memory.content_id == mine.old.content_id and again.memory.pk != mine.old.pk
    response = member_client.get(f"{A}/memory/{mine.old.pk}/change/")
    assert [m.pk for m in response.context["content_sharers"]] == [again.memory.pk]


def test_memory_timeline_shows_changed_details_and_generation(member_client: Client, mine: World) -> None:
    from memory_engine.services.memories import memory_write

    result = memory_write(store=mine.store, content="The user alphamark lives in Berlin since 2021.",
                          principal="rule:x", mechanism="rule", about={"kind": "profile", "key": "city"},
                          generation_id=mine.generation.pk, rule_id=mine.rule.pk)
    response = member_client.get(f"{A}/memory/{result.memory.pk}/change/")
    body = text(response)
    assert len(response.context["timeline"]) == 3
    assert mine.generation.pk in body and mine.rule.pk in body and "door <b>rule</b>" in body


def test_superseded_changelist(member_client: Client, mine: World) -> None:
    response = member_client.get(f"{A}/memory/superseded/")
    assert response.status_code == 200
    body = text(response)
    assert "Superseded facts" in body
    assert "lives in Paris" in body and "lives in Berlin" in body and "about_key" in body
    assert response.context["cl"].result_count == 1
    assert member_client.get(f"{A}/memory/superseded/", {"door": "api"}).context["cl"].result_count == 1
    assert member_client.get(f"{A}/memory/superseded/", {"door": "rule"}).context["cl"].result_count == 0
    store = member_client.get(f"{A}/memory/superseded/", {"store__id__exact": mine.store.pk})
    assert store.context["cl"].result_count == 1
    dated = member_client.get(f"{A}/memory/superseded/", {"invalidated_at__year": "1999"})
    assert dated.context["cl"].result_count == 0


def test_assertions_changelist(member_client: Client, mine: World) -> None:
    response = member_client.get(f"{A}/memoryassertion/")
    assert response.status_code == 200 and response.context["cl"].result_count == 2
    body = text(response)
    assert f"/memory/{mine.new.pk}/change/" in body  # link to the memory
    assert "Add memory assertion" not in body
    assert member_client.get(f"{A}/memoryassertion/", {"outcome__exact": "superseded"}).context["cl"].result_count == 1
    assert member_client.get(f"{A}/memoryassertion/", {"q": "Berlin"}).context["cl"].result_count == 1
    assert member_client.get(f"{A}/memoryassertion/", {"principal": "key:alphamark"}).context["cl"].result_count == 2
    assertion = MemoryAssertion.objects.filter(store=mine.store).first()
    detail = member_client.get(f"{A}/memoryassertion/{assertion.pk}/change/")
    assert detail.status_code == 200 and "Save" not in text(detail)
    assert member_client.post(f"{A}/memoryassertion/{assertion.pk}/delete/").status_code == 403


def test_generation_links_to_its_assertions(member_client: Client, mine: World) -> None:
    from memory_engine.services.memories import memory_write

    memory_write(store=mine.store, content="The user alphamark owns a cat.", principal=f"rule:{mine.rule.pk}",
                 mechanism="rule", generation_id=mine.generation.pk, rule_id=mine.rule.pk)
    listing = text(member_client.get(f"{A}/generation/"))
    assert f"?generation={mine.generation.pk}" in listing
    detail = text(member_client.get(f"{A}/generation/{mine.generation.pk}/change/"))
    assert f"?generation={mine.generation.pk}&amp;rule__id__exact={mine.rule.pk}" in detail
    linked = member_client.get(f"{A}/memoryassertion/", {"generation": mine.generation.pk,
                                                         "rule__id__exact": mine.rule.pk})
    assert linked.status_code == 200 and linked.context["cl"].result_count == 1


# --------------------------------------------------------------------------- documents


def test_document_pages(member_client: Client, mine: World) -> None:
    listing = text(member_client.get(f"{A}/document/"))
    assert "NO_TEXT_LAYER" in listing and "1/1" in listing
    failed = text(member_client.get(f"{A}/document/{mine.failed.pk}/change/"))
    assert "OCR converter" in failed
    ready = member_client.get(f"{A}/document/{mine.ready.pk}/change/")
    assert "office opens at nine" in text(ready) and "ready" in text(ready)


def test_document_actions(member_client: Client, mine: World, django_capture_on_commit_callbacks: Any) -> None:
    url = f"{A}/document/"
    with django_capture_on_commit_callbacks(execute=True):
        response = member_client.post(url, {"action": "reingest", "_selected_action": [mine.ready.pk]}, follow=True)
    assert "1 document(s) queued" in text(response)
    step = member_client.post(url, {"action": "reingest_with_settings", "_selected_action": [mine.ready.pk]})
    assert step.status_code == 200 and "Chunk size" in text(step) and mine.ready.path in text(step)
    with django_capture_on_commit_callbacks(execute=True):
        done = member_client.post(url, {"action": "reingest_with_settings", "_selected_action": [mine.ready.pk],
                                        "apply": "1", "strategy": "size", "size": "20", "overlap": "4"}, follow=True)
    assert "1 document(s) queued" in text(done)
    document = Document.objects.get(pk=mine.ready.pk)
    assert (document.chunk_strategy, document.chunk_size, document.chunk_overlap) == ("size", 20, 4)
    assert document.status == "ready" and document.total_chunks > 1
    bad = member_client.post(url, {"action": "reingest_with_settings", "_selected_action": [mine.ready.pk],
                                   "apply": "1", "strategy": "size", "size": "20", "overlap": "40"}, follow=True)
    # refused with its code, nothing queued, the settings of the previous step kept
    assert "CHUNK_SETTINGS_INVALID" in text(bad) and "queued" not in text(bad)
    document.refresh_from_db()
    assert (document.chunk_strategy, document.chunk_size, document.chunk_overlap) == ("size", 20, 4)
    embedded = member_client.post(url, {"action": "reembed_missing", "_selected_action": [mine.ready.pk]}, follow=True)
    assert "chunk vector(s) filled" in text(embedded)


def test_document_upload_from_the_admin(member_client: Client, mine: World, theirs: World,
                                        django_capture_on_commit_callbacks: Any) -> None:
    fields = {"project": mine.project.pk, "title": "", "tags": "{}", "metadata": "{}", "strategy": "", "size": "",
              "overlap": "", "password": "", "document_path": "/uploads/notes.txt"}
    with django_capture_on_commit_callbacks(execute=True):
        response = member_client.post(f"{A}/document/add/", {
            **fields, "upload": SimpleUploadedFile("notes.txt", b"Uploaded from the admin.", "text/plain")})
    assert response.status_code == 302
    assert Document.objects.get(path="/uploads/notes.txt", project=mine.project).status == "ready"
    foreign = member_client.post(f"{A}/document/add/", {
        **fields, "project": theirs.project.pk, "document_path": "/uploads/x.txt",
        "upload": SimpleUploadedFile("x.txt", b"x", "text/plain")})
    assert foreign.status_code == 200 and not Document.objects.filter(path="/uploads/x.txt").exists()


def test_ingestion_rule_tester(member_client: Client, mine: World) -> None:
    from memory_engine.models import IngestionRule

    IngestionRule.objects.create(project=mine.project, content_type_glob="application/*", converter_type="callable",
                                 converter_path="tests.admin.handlers.fact_lines")
    response = member_client.get(f"{A}/ingestionrule/tester/", {"project": mine.project.pk,
                                                               "content_type": "application/pdf"})
    assert response.status_code == 200
    assert response.context["winner"].pk == mine.ingestion_rule.pk
    assert "← wins" in text(response)
    other = member_client.get(f"{A}/ingestionrule/tester/", {"project": mine.project.pk,
                                                            "content_type": "application/msword"})
    assert other.context["winner"].content_type_glob == "application/*"
    none = member_client.get(f"{A}/ingestionrule/tester/", {"project": mine.project.pk, "content_type": "text/plain"})
    assert none.context["winner"] is None and "No enabled rule matches" in text(none)
    assert member_client.get(f"{A}/ingestionrule/tester/").status_code == 200  # the empty form


# --------------------------------------------------------------------------- memory rules dry run


def counts() -> tuple[int, int, int]:
    return Memory.objects.count(), MemoryAssertion.objects.count(), MemoryContent.objects.count()


def test_dry_run_decides_and_writes_nothing(member_client: Client, mine: World) -> None:
    url = f"{A}/memoryrule/{mine.rule.pk}/dry-run/"
    assert member_client.get(url).status_code == 200
    before = counts()
    transcript = ("user: fact The user alphamark lives in Berlin. | about profile/city\n"
                  "user: fact The user alphamark lives in Rome. | about profile/city\n"
                  "user: fact The user alphamark plays chess on Sundays.\n")
    response = member_client.post(url, {"transcript": transcript})
    assert response.status_code == 200
    assert counts() == before  # nothing written
    rows = response.context["outcome"]["rows"]
    assert [r["action"] for r in rows] == ["skipped", "superseded", "created"]
    assert rows[0]["existing"][0] == mine.new.pk and rows[1]["existing"][0] == mine.new.pk
    assert rows[1]["reason"] == "about_key"
    body = text(response)
    assert "supersede" in body and "create" in body and "skip" in body
    assert Memory.objects.get(pk=mine.new.pk).invalidated_at is None


def test_dry_run_reports_handler_errors(member_client: Client, mine: World) -> None:
    mine.rule.handler_config = {"path": "tests.admin.handlers.no_such_function"}
    mine.rule.save()
    before = counts()
    response = member_client.post(f"{A}/memoryrule/{mine.rule.pk}/dry-run/", {"transcript": "user: hi"})
    assert response.status_code == 200 and counts() == before
    assert response.context["outcome"]["error"] and "errornote" in text(response)


def test_memory_rule_list_links_to_dry_run(member_client: Client, mine: World) -> None:
    body = text(member_client.get(f"{A}/memoryrule/"))
    assert f"/memoryrule/{mine.rule.pk}/dry-run/" in body and f"rule__id__exact={mine.rule.pk}" in body


# --------------------------------------------------------------------------- search playground


def test_playground(member_client: Client, mine: World) -> None:
    url = f"{A}/project/playground/"
    empty = member_client.get(url)
    assert empty.status_code == 200 and "result" not in empty.context
    response = member_client.get(url, {"project": mine.project.pk, "query": "office opens", "limit": 5, "rrf_k": 60,
                                       "recency_half_life_days": 0, "channels": ["vector", "lexical"],
                                       "stores": [mine.store.pk], "document_paths": "/alphamark/"})
    assert response.status_code == 200
    result = response.context["result"]
    assert {h.source for h in result.results} == {"memory", "document"}
    assert result.results[0].document_path == "/alphamark/handbook.txt"
    body = text(response)
    assert "&lt;knowledge&gt;" in body and "[Document: /alphamark/handbook.txt]" in body
    assert "not degraded" in body
    assert response.context["knowledge"].startswith("<knowledge>")
    tagged = member_client.get(url, {"project": mine.project.pk, "query": "Berlin", "limit": 5, "rrf_k": 60,
                                     "recency_half_life_days": 0, "channels": ["lexical"], "tags": "[1]"})
    assert "Enter a JSON object" in text(tagged)
    bad = member_client.get(url, {"project": mine.project.pk, "query": "x", "limit": 5, "rrf_k": 60,
                                  "recency_half_life_days": 0, "channels": ["vector"], "min_similarity": "0.5",
                                  "document_paths": "no-slash"})
    assert bad.status_code == 200


def test_playground_rejects_a_store_of_another_project(superuser_client: Client, mine: World,
                                                       theirs: World) -> None:
    response = superuser_client.get(f"{A}/project/playground/", {
        "project": mine.project.pk, "query": "Berlin", "limit": 5, "rrf_k": 60, "recency_half_life_days": 0,
        "channels": ["vector", "lexical"], "stores": [theirs.store.pk]})
    assert "UNKNOWN_SCOPE" in text(response)


# --------------------------------------------------------------------------- API keys


def test_api_key_create_shows_secret_once_and_revoke(member_client: Client, mine: World, theirs: World) -> None:
    response = member_client.post(f"{A}/apikey/add/", {"project": mine.project.pk, "name": "ops"}, follow=True)
    body = text(response)
    match = re.search(r"shown once, copy it now\): <code id=\"new-api-key\">(me_[\w-]+)", body)
    assert match, body[:3000]
    key = ApiKey.objects.get(name="ops")
    assert key.prefix in match.group(1)
    again = text(member_client.get(f"{A}/apikey/{key.pk}/change/"))
    assert match.group(1) not in again
    foreign = member_client.post(f"{A}/apikey/add/", {"project": theirs.project.pk, "name": "evil"})
    assert foreign.status_code == 200 and not ApiKey.objects.filter(name="evil").exists()
    revoked = member_client.post(f"{A}/apikey/", {"action": "revoke", "_selected_action": [key.pk]}, follow=True)
    assert "Revoked 1 key(s)" in text(revoked)
    key.refresh_from_db()
    assert key.revoked_at is not None


def test_project_changelist_links_to_console(member_client: Client, mine: World) -> None:
    body = text(member_client.get(f"{A}/project/"))
    assert f"/project/{mine.project.pk}/overview/" in body and f"playground/?project={mine.project.pk}" in body
    assert User.objects.filter(username="member").exists() and Project.objects.count() == 2


def test_forget_action_goes_through_the_funnel(member_client: Client, mine: World) -> None:
    assert member_client.post(f"{A}/memory/{mine.new.pk}/delete/").status_code == 403
    response = member_client.post(f"{A}/memory/", {"action": "forget", "_selected_action": [mine.new.pk]}, follow=True)
    assert "Forgot 1 memory(ies)" in text(response)
    memory = Memory.objects.get(pk=mine.new.pk)
    assert memory.invalidated_at is not None
    forgotten = MemoryAssertion.objects.get(memory=memory, outcome="forgotten")
    assert forgotten.principal == "user:member"
    timeline = text(member_client.get(f"{A}/memory/{mine.new.pk}/change/"))
    assert "forgotten</span> by <b>user:member</b>" in timeline
