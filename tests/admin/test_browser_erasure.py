"""Deleting a store and a project with ledger rows through the admin, in a real browser
(headless Chromium driven by Selenium, the setup of ``test_browser.py``): the bulk action
on the store list, then the Delete button of a project's page. Screenshots go to
``test-artifacts/admin/``."""

from __future__ import annotations

from typing import Any

import pytest

from .test_browser import driver, shoot, wait_until  # noqa: F401 (driver: a fixture; skips or, under CI, fails)

#: Only the deletion confirmation pages carry this hidden field.
CONFIRMATION = "input[type=hidden][name=post]"

pytestmark = pytest.mark.slow


@pytest.fixture
def stores_with_ledgers(transactional_db: Any, hashing_embedder: Any) -> dict[str, Any]:
    """Two projects, each with a store whose ledger has a create and a supersede."""
    from django.contrib.auth.models import User

    from memory_engine.services.memories import memory_write
    from tests.factories import MemoryStoreFactory, ProjectFactory

    User.objects.create_superuser("operator", "operator@example.com", "console-pw")
    made = {}
    for name in ("acme", "globex"):
        project = ProjectFactory(name=name)
        store = MemoryStoreFactory(project=project, name=f"{name}-facts")
        city = {"kind": "profile", "key": "city"}
        memory_write(store=store, content="The user lives in Paris.", principal="key:ops", about=city)
        memory_write(store=store, content="The user lives in Berlin.", principal="key:ops", about=city)
        made[name] = store
    return made


def test_operator_deletes_a_store_and_a_project_with_ledger_rows(driver: Any, live_server: Any,  # noqa: F811
                                                                 stores_with_ledgers: dict[str, Any]) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from memory_engine.models import Memory, MemoryAssertion, MemoryStore, Project

    base = live_server.url
    browser = driver
    acme, globex = stores_with_ledgers["acme"], stores_with_ledgers["globex"]
    assert MemoryAssertion.objects.filter(store=acme).count() == 2

    browser.get(f"{base}/admin/login/?next=/admin/memory_engine/memorystore/")
    browser.find_element(By.NAME, "username").send_keys("operator")
    browser.find_element(By.NAME, "password").send_keys("console-pw")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    wait_until(browser, lambda d: d.find_elements(By.ID, "changelist"))

    # the store list's bulk action: confirmation with counts, then the deletion
    browser.find_element(By.CSS_SELECTOR, f"input[name=_selected_action][value='{acme.pk}']").click()
    Select(browser.find_element(By.NAME, "action")).select_by_value("delete_selected")
    browser.find_element(By.CSS_SELECTOR, "button[name=index]").click()
    wait_until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, CONFIRMATION))
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "Memory assertions: 2" in body and "Memories: 2" in body, body
    assert "permission" not in body.lower()
    shoot(browser, "20-store-delete-confirmation")
    browser.find_element(By.CSS_SELECTOR, "#content form input[type=submit]").click()
    success = wait_until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".messagelist .success"))[0]
    assert "Successfully deleted 1 memory store" in success.text
    shoot(browser, "21-store-deleted")
    assert not MemoryStore.objects.filter(pk=acme.pk).exists()
    assert not MemoryAssertion.objects.filter(store_id=acme.pk).exists()
    assert not Memory.objects.filter(store_id=acme.pk).exists()

    # a project's page: Delete, confirm, and its store's ledger goes with it
    project = globex.project
    browser.get(f"{base}/admin/memory_engine/project/{project.pk}/change/")
    browser.find_element(By.CSS_SELECTOR, "a.deletelink").click()
    wait_until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, CONFIRMATION))
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "Memory assertions: 2" in body and "Memory stores: 1" in body, body
    shoot(browser, "22-project-delete-confirmation")
    browser.find_element(By.CSS_SELECTOR, "#content form input[type=submit]").click()
    success = wait_until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, ".messagelist .success"))[0]
    assert "was deleted successfully" in success.text
    assert not Project.objects.filter(pk=project.pk).exists()
    assert MemoryAssertion.objects.count() == 0 and MemoryStore.objects.count() == 0
