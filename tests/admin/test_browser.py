"""The operator console in a real browser: headless Chromium (Debian ``chromium`` and
``chromium-driver``) driven by Selenium against pytest-django's live server.

One journey: log in, upload a PDF from the admin and watch it reach ``ready``, read the
project overview, run a search in the playground, open a superseded memory's timeline
from the superseded-facts list, dry-run a memory rule, test an ingestion rule, open a store's
memory map from the console's panel. Every page is saved as a screenshot under
``test-artifacts/admin/`` (git-ignored); docs/screenshots/ holds copies of those the docs show.

Selenium Manager never downloads anything: the driver and browser paths are given.
``make test`` installs the packages when they are missing and it runs as root; elsewhere
these tests skip with the reason, except under ``CI=true``, where a missing browser fails
them (a CI run must not pass without its browser journey).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.pdfs import sample_pdf
from tests.skips import require

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
ARTIFACTS = ROOT / "test-artifacts" / "admin"
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--no-first-run"]


def browser_missing() -> str:
    """Why Selenium cannot drive the headless Chromium here ("" when it can)."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    for path in (CHROMIUM, CHROMEDRIVER):
        if not os.access(path, os.X_OK):
            return f"{path} is missing: apt-get install chromium chromium-driver (make test does it as root)"
    return ""


def require_browser() -> None:
    """Skip when the browser cannot be driven here; under CI, fail instead of skipping."""
    require("browser", browser_missing())


pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def driver() -> Iterator[Any]:
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # belt and braces: Selenium Manager stays offline
    profile = tempfile.mkdtemp(prefix="me-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in [*CHROMIUM_FLAGS, f"--user-data-dir={profile}", "--window-size=1400,1000"]:
        options.add_argument(flag)
    browser = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    browser.set_page_load_timeout(60)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    try:
        yield browser
    finally:
        browser.quit()
        shutil.rmtree(profile, ignore_errors=True)


def shoot(browser: Any, name: str) -> Path:
    """A full-page screenshot (through the DevTools protocol, beyond the viewport)."""
    import base64

    size = browser.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
    clip = {"x": 0, "y": 0, "width": 1400, "height": min(int(size["height"]), 4000), "scale": 1}
    shot = browser.execute_cdp_cmd("Page.captureScreenshot",
                                   {"format": "png", "captureBeyondViewport": True, "clip": clip})
    path = ARTIFACTS / f"{name}.png"
    path.write_bytes(base64.b64decode(shot["data"]))
    return path


def wait_until(browser: Any, predicate: Any, timeout: float = 30.0) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, timeout).until(lambda d: predicate(d))


@pytest.fixture
def console_data(transactional_db: Any, settings: Any, tmp_path: Path) -> dict[str, Any]:
    """A project with a supersede chain, a failed scanned PDF, a memory rule and a rule error."""
    from django.contrib.auth.models import User

    from memory_engine.models import Generation, MemoryRule
    from memory_engine.services.documents import Upload, document_create
    from memory_engine.services.memories import memory_write
    from tests.factories import AgentFactory, MemoryStoreFactory, ProjectFactory

    settings.MEDIA_ROOT = str(tmp_path / "media")
    User.objects.create_superuser("operator", "operator@example.com", "console-pw")
    project = ProjectFactory(name="acme")
    store = MemoryStoreFactory(project=project, name="user-facts")
    agent = AgentFactory(project=project, name="support-bot", write_memory_store=store)
    channel = {"kind": "preference", "key": "contact_channel"}
    memory_write(store=store, content="The user prefers to be contacted by email.", principal="key:support",
                 about=channel, tags={"kind": "preference"})
    memory_write(store=store, content="The user prefers phone calls over email.", principal="agent:support-bot",
                 mechanism="tool", about=channel)
    latest = memory_write(store=store, content="The user prefers phone calls, but only after 6 pm.",
                          principal="rule:extractor", mechanism="rule", about=channel)
    memory_write(store=store, content="The user's office is in Lisbon.", principal="key:support")
    memory_write(store=store, content="The user works on the billing migration project.", principal="key:support")
    for text in ("The user's invoices are due on the first business day of each month.",
                 "The user asked for the billing export as CSV with invoice numbers.",
                 "Refunds for the user's invoices go back to the original card.",
                 "The user is travelling to Tokyo for a conference in March.",
                 "The user prefers aisle seats on long flights.",
                 "The user's hotel in Tokyo is near Shinagawa station.",
                 "The user has a dog named Rex who needs walking at noon.",
                 "Rex, the user's dog, is allergic to chicken."):
        memory_write(store=store, content=text, principal="key:support")  # the memory map's clusters
    rule = MemoryRule.objects.create(store=store, handler_type="callable",
                                     handler_config={"path": "tests.admin.handlers.fact_lines"})
    Generation.objects.create(project=project, agent=agent, output="Sure.", extraction={
        rule.pk: {"created": 0, "superseded": 0, "skipped": 0, "failed": 1,
                  "error": {"code": "LLM_NOT_CONFIGURED", "message": "No LLM provider is configured."}}})
    document_create(project=project, upload=Upload(sample_pdf("scanned.pdf"), filename="scanned.pdf",
                                                   declared_content_type="application/pdf"),
                    path="/scans/linn.pdf")  # fails with NO_TEXT_LAYER (ingested inline on commit)
    return {"project": project, "store": store, "rule": rule, "latest": latest.memory}


def test_operator_journey(driver: Any, live_server: Any, console_data: dict[str, Any],
                          sample_pdf_dir: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from memory_engine.models import Document, Memory, MemoryAssertion, MemoryContent

    base = live_server.url
    project = console_data["project"]
    browser = driver

    # log in
    browser.get(f"{base}/admin/login/?next=/admin/memory_engine/")
    shoot(browser, "01-login")
    browser.find_element(By.NAME, "username").send_keys("operator")
    browser.find_element(By.NAME, "password").send_keys("console-pw")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    wait_until(browser, lambda d: d.find_elements(By.ID, "operator-console"))
    browser.execute_script("localStorage.setItem('django.admin.navSidebarIsOpen', 'false')")  # wider pages
    browser.refresh()
    shoot(browser, "02-app-index")

    # upload a PDF from the admin and watch it reach `ready`
    browser.get(f"{base}/admin/memory_engine/document/add/")
    Select(browser.find_element(By.NAME, "project")).select_by_visible_text("acme")
    browser.find_element(By.NAME, "upload").send_keys(str(sample_pdf_dir / "four-pages.pdf"))
    browser.find_element(By.NAME, "document_path").send_keys("/handbook/blind-text.pdf")
    browser.find_element(By.NAME, "title").send_keys("Blind text (4 pages)")
    shoot(browser, "03-document-upload")
    browser.find_element(By.NAME, "_save").click()
    wait_until(browser, lambda d: "/admin/memory_engine/document/" in d.current_url
               and "add" not in d.current_url)
    document = Document.objects.get(project=project, path="/handbook/blind-text.pdf")
    detail = f"{base}/admin/memory_engine/document/{document.pk}/change/"
    deadline = time.monotonic() + 90
    while True:
        browser.get(detail)
        badge = browser.find_element(By.CSS_SELECTOR, ".field-status_badge .readonly").text
        if badge == "ready" or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert badge == "ready"
    progress = browser.find_element(By.CSS_SELECTOR, ".field-progress .readonly").text
    assert progress.startswith("4/4"), progress
    browser.find_element(By.CSS_SELECTOR, "fieldset.collapse summary, fieldset.collapse h2").click()
    wait_until(browser, lambda d: "page" in d.find_element(By.CSS_SELECTOR, "fieldset.collapse").text.lower())
    shoot(browser, "04-document-ready")
    browser.get(f"{base}/admin/memory_engine/document/")
    assert "NO_TEXT_LAYER" in browser.page_source
    shoot(browser, "05-documents")
    browser.find_element(By.LINK_TEXT, "/scans/linn.pdf").click()
    wait_until(browser, lambda d: "OCR converter" in d.find_element(By.TAG_NAME, "body").text)
    shoot(browser, "05b-document-failed")

    # the project overview
    browser.get(f"{base}/admin/memory_engine/project/{project.pk}/overview/")
    body = browser.find_element(By.TAG_NAME, "body").text
    assert "user-facts" in body and "NO_TEXT_LAYER" in body and "LLM_NOT_CONFIGURED" in body
    shoot(browser, "06-overview")

    # a search in the playground, with the exact <knowledge> message
    browser.get(f"{base}/admin/memory_engine/project/playground/?project={project.pk}")
    Select(browser.find_element(By.NAME, "stores")).select_by_visible_text("acme / user-facts")
    query = browser.find_element(By.NAME, "query")
    query.send_keys("Can we phone the user in the evening?")
    browser.find_element(By.NAME, "document_paths").send_keys("/handbook/")
    browser.find_element(By.NAME, "_search").click()
    try:
        wait_until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "#playground-results, .errornote"))
    except Exception:
        shoot(browser, "debug")
        (ARTIFACTS / "debug.html").write_text(browser.page_source)
        raise
    errors = browser.find_elements(By.CSS_SELECTOR, ".errornote, .errorlist")
    assert not errors, [e.text for e in errors]
    results = browser.find_element(By.ID, "playground-results")
    assert "phone calls, but only after 6 pm" in results.text
    assert "<knowledge>" in browser.find_element(By.ID, "knowledge-preview").text
    shoot(browser, "07-search-playground")

    # superseded facts: at 1400 px, with the navigation sidebar open (the default) or closed, the
    # similarity, reason, door and retirement time are on screen, not scrolled out of the table
    for sidebar in ("true", "false"):
        browser.execute_script(f"localStorage.setItem('django.admin.navSidebarIsOpen', '{sidebar}')")
        browser.get(f"{base}/admin/memory_engine/memory/superseded/")
        assert "The user prefers to be contacted by email." in browser.page_source
        hidden = browser.execute_script("""
            const box = document.querySelector('#changelist .results').getBoundingClientRect();
            return ['retiring_similarity', 'retiring_reason', 'door', 'retired_at'].filter(name => {
                const cell = document.querySelector('th.column-' + name).getBoundingClientRect();
                return cell.left < box.left || cell.right > box.right + 0.5 || cell.right > window.innerWidth;
            });""")
        assert hidden == [], (sidebar, hidden)
    shoot(browser, "08-superseded-facts")
    first_retired = Memory.objects.filter(store=console_data["store"], superseded_by__isnull=False) \
        .order_by("created_at").first()
    browser.find_element(By.CSS_SELECTOR, f"td.field-old_text a[title='{first_retired.pk}']").click()
    timeline = wait_until(browser, lambda d: d.find_elements(By.ID, "supersede-timeline"))[0]
    why = browser.find_element(By.ID, "memory-why")
    assert "retired: superseded" in why.text and "about_key" in why.text
    assert why.location["y"] < timeline.location["y"] < browser.find_element(By.CSS_SELECTOR, ".field-id").location["y"]
    assert "3 versions" in timeline.text and "about_key" in timeline.text
    assert timeline.text.index("contacted by email") < timeline.text.index("only after 6 pm")
    shoot(browser, "09-memory-timeline")

    # assertions ledger
    browser.get(f"{base}/admin/memory_engine/memoryassertion/?outcome__exact=superseded")
    shoot(browser, "10-assertions")

    # a memory rule dry run writes nothing
    before = (Memory.objects.count(), MemoryAssertion.objects.count(), MemoryContent.objects.count())
    browser.get(f"{base}/admin/memory_engine/memoryrule/{console_data['rule'].pk}/dry-run/")
    browser.find_element(By.NAME, "transcript").send_keys(
        "user: fact The user prefers phone calls, but only after 6 pm. | about preference/contact_channel\n"
        "user: fact The user prefers text messages now. | about preference/contact_channel\n"
        "user: fact The user has a dog named Rex.\n")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    rows = wait_until(browser, lambda d: d.find_elements(By.ID, "dry-run-results"))[0]
    assert "skip" in rows.text and "supersede" in rows.text and "create" in rows.text
    assert (Memory.objects.count(), MemoryAssertion.objects.count(), MemoryContent.objects.count()) == before
    shoot(browser, "11-memory-rule-dry-run")

    # which ingestion rule wins?
    browser.get(f"{base}/admin/memory_engine/ingestionrule/tester/?project={project.pk}&content_type=application/pdf")
    assert "No enabled rule matches" in browser.page_source
    shoot(browser, "12-ingestion-rule-tester")

    # the memory map, from the console's panel: every label drawn inside the picture, beside the
    # cross at its cluster's centre
    browser.get(f"{base}/admin/memory_engine/")
    browser.find_element(By.CSS_SELECTOR, "#operator-console").find_element(By.LINK_TEXT, "Memory maps").click()
    row = wait_until(browser, lambda d: d.find_elements(By.XPATH, "//tr[.//a[text()='user-facts']]"))[0]
    row.find_element(By.LINK_TEXT, "map").click()
    wait_until(browser, lambda d: d.find_elements(By.CSS_SELECTOR, "svg[aria-label='memory map']"))
    labels = browser.execute_script("""
        return [...document.querySelectorAll('svg text.cluster-label')].map(t => {
            const b = t.getBBox();
            return {text: t.textContent, x: b.x, y: b.y, w: b.width, h: b.height,
                    cx: +t.dataset.cx, cy: +t.dataset.cy};
        });""")
    assert labels, browser.page_source
    for label in labels:
        assert label["x"] >= 0 and label["x"] + label["w"] <= 900, label
        assert label["y"] >= 0 and label["y"] + label["h"] <= 640, label
        assert label["x"] <= label["cx"] <= label["x"] + label["w"], label
        assert abs(label["y"] + label["h"] / 2 - label["cy"]) <= 45, label
    assert not any(".." in text for text in browser.find_element(By.ID, "content-main").text.split())
    shoot(browser, "13-memory-map")


@pytest.mark.parametrize("ci, outcome", [("true", pytest.fail.Exception), ("", pytest.skip.Exception)])
def test_a_missing_browser_skips_only_outside_ci(monkeypatch: pytest.MonkeyPatch, ci: str, outcome: Any) -> None:
    monkeypatch.setattr(f"{__name__}.CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="/nonexistent/chromium is missing"):
        require_browser()
