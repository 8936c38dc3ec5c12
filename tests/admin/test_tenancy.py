"""Projects and API keys in the admin: a new key never travels in a cookie, a revoked key
cannot be revived, and the members widget does not list the whole instance's users."""

from __future__ import annotations

import re
from typing import Any

from django.contrib.auth.models import User
from django.contrib.sessions.models import Session
from django.test import Client

from memory_engine.models import ApiKey
from memory_engine.services.keys import api_key_create, api_key_revoke

from .conftest import World, staff_user

A = "/admin/memory_engine"


def test_new_key_is_shown_in_the_response_and_never_in_a_cookie(member_client: Client, mine: World) -> None:
    response = member_client.post(f"{A}/apikey/add/", {"project": mine.project.pk, "name": "ops"})
    assert response.status_code == 200
    body = response.content.decode()
    raw = re.search(r"shown once, copy it now\): <code id=\"new-api-key\">(me_[\w-]+)</code>", body).group(1)
    key = ApiKey.objects.get(name="ops")
    assert key.prefix in raw and "no-store" in response["Cache-Control"]
    for morsel in response.cookies.values():
        assert raw not in morsel.value and key.prefix not in morsel.value, morsel.key
    for cookie in member_client.cookies.values():
        assert raw not in cookie.value
    assert not any(raw in s.get_decoded().__repr__() for s in Session.objects.all())
    # The next pages do not show it again (no message was queued for them).
    assert raw not in member_client.get(f"{A}/apikey/").content.decode()
    assert raw not in member_client.get(f"{A}/apikey/{key.pk}/change/").content.decode()


def project_form(world: World, keys: list[ApiKey], **key_overrides: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"name": world.project.name, "max_memories": "", "max_document_bytes": "",
                            "api_keys-TOTAL_FORMS": str(len(keys)), "api_keys-INITIAL_FORMS": str(len(keys)),
                            "api_keys-MIN_NUM_FORMS": "0", "api_keys-MAX_NUM_FORMS": "1000"}
    for i, key in enumerate(keys):
        data.update({f"api_keys-{i}-id": key.pk, f"api_keys-{i}-project": world.project.pk,
                     f"api_keys-{i}-name": key.name, f"api_keys-{i}-expires_at_0": "",
                     f"api_keys-{i}-expires_at_1": "", f"api_keys-{i}-revoked_at_0": "",
                     f"api_keys-{i}-revoked_at_1": ""})
        data.update({f"api_keys-{i}-{k}": v for k, v in key_overrides.items()})
    return data


def test_revoked_key_cannot_be_revived_in_the_project_inline(superuser_client: Client, mine: World) -> None:
    key, raw = api_key_create(project=mine.project, name="old")
    api_key_revoke(key=key)
    keys = list(ApiKey.objects.filter(project=mine.project).order_by("created_at"))
    url = f"{A}/project/{mine.project.pk}/change/"
    page = superuser_client.get(url).content.decode()
    assert 'name="api_keys-0-revoked_at_0"' not in page and 'name="api_keys-1-revoked_at_0"' not in page
    response = superuser_client.post(url, project_form(mine, keys))  # revoked_at blanked out
    assert response.status_code == 302, response.content.decode()[:3000]
    key.refresh_from_db()
    assert key.revoked_at is not None
    from tests.conftest import api_client

    assert api_client(raw).get("/api/v1/memory-stores").status_code == 401


def test_members_widget_lists_only_people_of_my_projects(mine: World, theirs: World) -> None:
    operator = staff_user("operator")
    mine.project.members.add(operator)
    colleague = User.objects.create_user("colleague", is_staff=True)
    mine.project.members.add(colleague)
    stranger = User.objects.create_user("stranger-of-theirs", is_staff=True)
    theirs.project.members.add(stranger)
    User.objects.create_user("loner-without-project", is_staff=True)
    client = Client()
    client.force_login(operator)
    response = client.get(f"{A}/project/{mine.project.pk}/change/")
    choices = {u.username for u in response.context["adminform"].form.fields["members"].queryset}
    assert choices == {"operator", "colleague"}
    body = response.content.decode()
    assert "stranger-of-theirs" not in body and "loner-without-project" not in body
    # Posting a user outside that list is refused.
    refused = client.post(f"{A}/project/{mine.project.pk}/change/", {
        **project_form(mine, list(ApiKey.objects.filter(project=mine.project))),
        "members": [operator.pk, colleague.pk, stranger.pk]})
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    assert not mine.project.members.filter(pk=stranger.pk).exists()


def test_superuser_sees_every_user(superuser_client: Client, mine: World, theirs: World) -> None:
    User.objects.create_user("loner-without-project", is_staff=True)
    response = superuser_client.get(f"{A}/project/{mine.project.pk}/change/")
    choices = {u.username for u in response.context["adminform"].form.fields["members"].queryset}
    assert {"root", "loner-without-project"} <= choices
