"""The review desk in a real browser, as a team lead uses it: headless Chromium (Debian's `chromium` with its
`chromium-driver`, driven by Selenium) logs in through the login form (CSRF and session as in production),
filters decisions by channel and status, runs a bulk supersede, reads the audit entry on the record, opens the
dashboard, and opens Flower with basic auth (refused without it). Screenshots of each step are saved under
`test-artefacts/browser/` (gitignored). `scripts/test` installs the browser; where none can be installed the
test is skipped, saying so."""

from __future__ import annotations

import base64
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import timedelta
from pathlib import Path

import httpx
import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from knowledge.models import Decision, LlmCall, MessageReceipt, ReviewAudit
from tests.conftest import ROOT, free_port, service_env, wait_for
from tests.retrieval import factory

pytestmark = pytest.mark.django_db(transaction=True)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
ARTEFACTS = ROOT / "test-artefacts" / "browser"
PASSWORD = "a-reviewers-password-for-tests"
FLOWER_AUTH = ("ops", "a-flower-password-for-tests")


def _missing() -> str | None:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -r requirements.txt)"
    if not CHROMIUM or not CHROMEDRIVER:
        return "no headless browser: install Debian's chromium and chromium-driver (scripts/test does, as root)"
    return None


@pytest.fixture
def browser():
    reason = _missing()
    if reason:
        pytest.skip(f"browser test skipped: {reason}")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile = tempfile.mkdtemp(prefix="jeeves-chromium-")
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                 "--window-size=1366,1000", f"--user-data-dir={profile}", "--no-first-run"):  # fmt: skip
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(120)
    driver.implicitly_wait(10)
    ARTEFACTS.mkdir(parents=True, exist_ok=True)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _shot(driver, name: str) -> Path:
    path = ARTEFACTS / f"{name}.png"
    # The whole page, not only the window: the admin's lists and the dashboard run long.
    height = driver.execute_script("return Math.max(document.body.scrollHeight, 1000)")
    driver.set_window_size(1366, min(height + 40, 4000))
    driver.save_screenshot(str(path))
    driver.set_window_size(1366, 1000)
    return path


@pytest.fixture
def flower(redis_url):
    """Flower as `jeeves up` runs it: basic auth, on a port of its own; stopped whatever the test does."""
    port = free_port()
    user, password = FLOWER_AUTH
    log = Path(tempfile.mkstemp(prefix="jeeves-flower-", suffix=".log")[1])
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "jeeves", "flower", "--address=127.0.0.1", f"--port={port}",
         f"--basic-auth={user}:{password}"],
        cwd=ROOT, env=service_env(redis_url, JEEVES_FLOWER_BASIC_AUTH=f"{user}:{password}"),
        stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        if proc.poll() is not None:
            return True
        try:
            httpx.get(url, timeout=2)
        except httpx.HTTPError:
            return False
        return True

    try:
        wait_for(answers, timeout=90, interval=0.5)
        assert proc.poll() is None, log.read_text(errors="replace")[-2000:]
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_a_team_lead_reviews_in_a_real_browser(live_server, browser, flower):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    lead = User.objects.create_superuser(f"lead-{uuid.uuid4().hex[:6]}", password=PASSWORD)
    billing = factory.channel(name="billing-platform")
    mobile = factory.channel(name="mobile-app")
    retries = factory.decision(billing, "payment retries move onto the queue", days_ago=3)
    budget = factory.decision(billing, "the vendor budget stays at the current level", days_ago=2)
    factory.decision(billing, "refunds are reviewed weekly", days_ago=1, status="reversed")
    factory.decision(mobile, "the app store release waits for the privacy manifest", days_ago=1)
    # A fortnight of traffic for the dashboard's charts: receipts (how far each message went) and model calls.
    now = timezone.now()
    for day in range(14):
        at = now - timedelta(days=day)
        for n in range(3 + (day * 7) % 9):
            MessageReceipt.objects.create(
                channel_id=billing.channel_id, wire_msg_id=f"d{day}-{n}", received_at=at, tier=2 if n % 3 else 1
            )
        for slot, calls in (("classify", 3 + day % 4), ("extract", 1 + day % 3)):
            for _ in range(calls):
                LlmCall.objects.create(slot=slot, model="local", latency_ms=4, outcome="ok", created_at=at)

    # Log in through the form: the session and CSRF cookies as a person gets them.
    browser.get(f"{live_server.url}/admin/login/?next=/admin/")
    browser.find_element(By.NAME, "username").send_keys(lead.username)
    browser.find_element(By.NAME, "password").send_keys(PASSWORD)
    _shot(browser, "01-login")
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    wait_for(lambda: "What Jeeves has recorded" in browser.page_source, timeout=60)
    assert "Jeeves review desk" in browser.page_source
    assert "Dashboard" in browser.page_source  # the front page links the dashboard
    _shot(browser, "02-admin-home")

    # Decisions, filtered by channel and status through the sidebar's filters.
    browser.get(f"{live_server.url}/admin/knowledge/decision/")
    filters = browser.find_element(By.ID, "changelist-filter")
    filters.find_element(By.LINK_TEXT, "Active").click()
    wait_for(lambda: "status__exact=active" in browser.current_url, timeout=30)
    filters = browser.find_element(By.ID, "changelist-filter")
    filters.find_element(By.PARTIAL_LINK_TEXT, "billing-platform").click()
    wait_for(lambda: "channel__channel_id__exact" in browser.current_url, timeout=30)
    rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    shown = {row.find_element(By.CSS_SELECTOR, "th a").text for row in rows}
    assert shown == {retries.friendly_id, budget.friendly_id}, shown
    # Every column of the list is in view on a laptop's screen: nothing to scroll sideways for.
    overflow = browser.execute_script(
        "const r = document.querySelector('.results'); return r.scrollWidth - r.clientWidth"
    )
    assert overflow <= 0, f"the decision list is {overflow}px wider than the page"
    _shot(browser, "03-decisions-filtered")

    # Bulk supersede of both.
    for box in browser.find_elements(By.CSS_SELECTOR, "#result_list input.action-select"):
        box.click()
    Select(browser.find_element(By.NAME, "action")).select_by_value("supersede")
    browser.find_element(By.NAME, "index").click()
    wait_for(lambda: "2 decision(s) marked superseded." in browser.page_source, timeout=60)
    _shot(browser, "04-bulk-supersede")
    assert set(Decision.objects.filter(pk__in=[retries.pk, budget.pk]).values_list("status", flat=True)) == {
        "superseded"
    }
    assert ReviewAudit.objects.filter(action="supersede", actor=lead.username).count() == 2

    # The audit entry, on the record.
    browser.get(f"{live_server.url}/admin/knowledge/decision/{retries.pk}/change/")
    history = browser.find_element(By.CSS_SELECTOR, "table.review-history")
    assert "supersede" in history.text and lead.username in history.text
    assert "active → superseded" in history.text
    browser.execute_script("arguments[0].scrollIntoView()", history)
    _shot(browser, "05-audit-entry")

    # The dashboard, with its two charts.
    browser.get(f"{live_server.url}/admin/dashboard/")
    charts = browser.find_elements(By.CSS_SELECTOR, "svg.jeeves-chart")
    assert len(charts) == 2 and all(c.size["width"] > 300 for c in charts)
    assert "Records by type" in browser.page_source
    _shot(browser, "06-dashboard")

    # Flower: refused without basic auth, open with it.
    assert httpx.get(flower, timeout=10).status_code == 401
    token = base64.b64encode(":".join(FLOWER_AUTH).encode()).decode()
    browser.execute_cdp_cmd("Network.enable", {})
    browser.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {"Authorization": f"Basic {token}"}})
    browser.get(f"{flower}/")
    wait_for(lambda: "Flower" in browser.title or "Workers" in browser.page_source, timeout=60)
    time.sleep(1)  # its tables fill in from its API
    _shot(browser, "07-flower")
    browser.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": {}})
