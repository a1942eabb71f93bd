"""The admin in a real browser: Debian's headless chromium driven through chromium-driver.

It logs in, opens the session list, a session page, the dashboard, the jobs and the calls lists, checks
what a person would look at (rows, pretty-printed JSON, drawn chart lines, a progress bar that
moves without a reload) and takes a screenshot of each.
Screenshots go to MCP_SCREENSHOT_DIR when set (``make screenshots`` refreshes docs/), else to
a temporary folder.
"""
import contextlib
import json
import os
import shutil
import time
from pathlib import Path

import pytest

from mcp_transport.testing import HttpClient

from .test_admin import GET, _progress_call, _session_with_history, session_url

CHROMEDRIVER = shutil.which("chromedriver")
#: The window the admin must fit (issue 11: a 1,280 px laptop screen, every column visible).
WIDTH = 1280
pytestmark = pytest.mark.skipif(
    CHROMEDRIVER is None, reason="needs Debian's chromium and chromium-driver (`make test` installs them with "
                                 "apt-get when it runs as root; otherwise: apt-get install chromium chromium-driver)")


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 f"--window-size={WIDTH},1000", "--hide-scrollbars",
                 f"--user-data-dir={tmp_path_factory.mktemp('chromium')}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(30)
    yield driver
    driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    folder = Path(os.environ.get("MCP_SCREENSHOT_DIR") or tmp_path_factory.mktemp("screenshots"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _traffic(server, seconds=6.0):
    """Sessions that resume, replay and fail to replay, and run a background job, spread over a
    few samples; one holds its standalone stream open."""
    clients, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        clients.append(_session_with_history(server, steps=len(clients) % 4 * 5 + 5))
        clients[-1].call("tools/call", {"name": "slow_job", "arguments": {"steps": 3, "interval_ms": len(clients) * 20}})
        time.sleep(0.2)
    streaming = HttpClient(server.url)
    streaming.initialize()
    held = streaming.stream("GET", headers=GET)
    held.next_event()
    call = streaming.stream("POST", _progress_call(streaming, steps=30, interval_ms=10))
    call.events()
    time.sleep(1.2)
    return clients, held


def _assert_fits(driver):
    """Every column of the list is inside the window: no horizontal scrolling of the table (the
    admin scrolls a table wider than its box), and the box inside the viewport."""
    widths = driver.execute_script(
        "var box = document.querySelector('#changelist-form .results');"
        "return {table: box.scrollWidth, box: box.clientWidth, right: box.getBoundingClientRect().right,"
        "        window: document.documentElement.clientWidth};")
    assert widths["table"] <= widths["box"] and widths["right"] <= widths["window"], widths


def _shoot(driver, path, height=None):
    if height:
        driver.set_window_size(WIDTH, height)
    driver.save_screenshot(str(path))
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@contextlib.contextmanager
def _an_old_sample():
    """A sample from ten minutes before this run's few seconds of them, as a server that
    sampled earlier leaves: the charts' samples bunch at the right end of their time axis."""
    from redis import Redis

    from mcp_transport.connections import keys

    oldest = json.dumps({"t": time.time() - 600})
    redis = Redis.from_url(os.environ["REDIS_URL"])
    redis.rpush(keys().samples(), oldest)  # the list is newest first
    try:
        yield
    finally:
        redis.lrem(keys().samples(), 1, oldest)
        redis.close()


def _assert_time_labels_apart(driver):
    """Every chart's time labels (start, middle, end of its axis) as drawn: inside the chart and
    clear of each other (the middle one once stood on the middle sample, over the last one)."""
    charts = driver.execute_script(
        "return Array.from(document.querySelectorAll('.mcp-chart svg')).map(function (svg) {"
        "  var box = svg.getBoundingClientRect();"
        "  return {box: [box.left, box.right], labels: Array.from(svg.querySelectorAll('text.time')).map("
        "    function (t) { var r = t.getBoundingClientRect(); return [r.left, r.right, t.textContent]; })};"
        "});")
    assert charts
    for chart in charts:
        labels = sorted(chart["labels"])
        assert len(labels) == 3, chart
        assert chart["box"][0] <= labels[0][0] and labels[-1][1] <= chart["box"][1] + 0.5, chart
        assert all(left[1] < right[0] for left, right in zip(labels, labels[1:])), chart


def test_admin_pages_in_a_browser(admin_server, admin_login, browser, shots, celery_worker):
    from selenium.webdriver.common.by import By
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.support.wait import WebDriverWait

    clients, held = _traffic(admin_server)
    base = admin_server.url.removesuffix("/mcp")
    browser.get(f"{base}/admin/login/?next=/admin/mcp_transport/mcpsession/")
    browser.find_element(By.NAME, "username").send_keys(admin_login[0])
    browser.find_element(By.NAME, "password").send_keys(admin_login[1])
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()

    # click() does not wait for the page it leads to: wait for it (a deadline, not a pause).
    try:
        WebDriverWait(browser, 120, poll_frequency=0.2).until(lambda driver: driver.title.startswith("Select MCP session"))
    except TimeoutException:
        pytest.fail(f"no session list after logging in; at {browser.current_url}: {browser.page_source[:2000]}")
    _assert_fits(browser)  # with the navigation sidebar open, as a first visit shows it
    rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    assert len(rows) >= len(clients) + 1
    assert browser.find_element(By.CSS_SELECTOR, ".mcp-badge").is_displayed()
    _shoot(browser, shots / "admin-sessions.png", 1000)

    browser.get(f"{base}{session_url(clients[-1].session_id)}/change/")
    # The page shows the event rows, which web processes write in batches behind Redis: reload
    # until the session's are written.
    blocks = WebDriverWait(browser, 120, poll_frequency=0.5).until(
        lambda driver: driver.find_elements(By.CSS_SELECTOR, "#events pre.mcp-json") or driver.refresh())
    assert '"jsonrpc": "2.0"' in blocks[0].text
    assert "POST request" in browser.find_element(By.ID, "streams").text
    _shoot(browser, shots / "admin-session.png", 1900)

    with _an_old_sample():
        browser.get(f"{base}/admin/mcp_transport/mcpsession/dashboard/")
    _assert_time_labels_apart(browser)
    # Every chart is drawn, and its lines join two samples or more. A line's own width is no
    # measure: the samples list is the run's, so when an earlier file's server sampled minutes
    # ago this test's few seconds of samples take a fraction of a pixel on the shared time axis.
    charts = browser.find_elements(By.CSS_SELECTOR, ".mcp-chart svg")
    assert charts and all(chart.size["width"] > 100 and chart.size["height"] > 50 for chart in charts)
    lines = browser.find_elements(By.CSS_SELECTOR, ".mcp-chart polyline")
    assert len(lines) >= 10 and all(len(line.get_attribute("points").split()) >= 2 for line in lines)
    cards = browser.find_elements(By.CSS_SELECTOR, ".mcp-card")
    assert len(cards) >= 11
    _shoot(browser, shots / "admin-dashboard.png", 2060)
    held.close()


def test_job_progress_bar_moves_without_a_reload(admin_server, admin_login, browser, shots, celery_worker):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    base = admin_server.url.removesuffix("/mcp")
    browser.set_window_size(WIDTH, 700)
    browser.get(f"{base}/admin/mcp_transport/mcpjob/")
    if "login" in browser.current_url:  # the module's first test logged in already, unless run alone
        browser.find_element(By.NAME, "username").send_keys(admin_login[0])
        browser.find_element(By.NAME, "password").send_keys(admin_login[1])
        browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
        WebDriverWait(browser, 120, poll_frequency=0.2).until(lambda driver: "login" not in driver.current_url)
    finished = HttpClient(admin_server.url)
    finished.initialize()
    finished.call("tools/call", {"name": "slow_job", "arguments": {"steps": 2, "interval_ms": 10}})
    client = HttpClient(admin_server.url)
    client.initialize()
    # Runs until it is cancelled below, however slow a loaded machine makes the page.
    call = client.message("tools/call", {"name": "slow_job", "arguments": {"steps": 1000, "interval_ms": 100},
                                         "_meta": {"progressToken": "p"}})
    stream = client.stream("POST", call)
    stream.next_event(timeout=120)
    stream.next_event(timeout=120)  # running in the worker
    browser.refresh()
    selector = "[data-job][data-active='1'] .mcp-progress-text"
    first = _done(browser.find_element(By.CSS_SELECTOR, selector).text)
    # The page polls every second and the worker writes progress about every half second: wait
    # (with a deadline, not a pause) for the bar to move without a reload.
    WebDriverWait(browser, 120, poll_frequency=0.2).until(
        lambda driver: _done(driver.find_element(By.CSS_SELECTOR, selector).text) > first)
    _assert_fits(browser)
    _shoot(browser, shots / "admin-jobs.png")
    client.request("POST", client.message("notifications/cancelled", {"requestId": call["id"]}, request_id=False))
    stream.close()


def _done(text) -> int:
    """The steps done that a bar's label shows ("14/1000"; "queued" or "" before any)."""
    head = text.split("/")[0]
    return int(head) if head.isdigit() else 0


def test_the_calls_list_of_both_eras_fits_the_window(admin_server, admin_login, browser, shots, celery_worker):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    from mcp_transport.testing import ModernClient

    legacy = HttpClient(admin_server.url)
    legacy.initialize()
    legacy.call("tools/call", {"name": "slow_job", "arguments": {"steps": 2, "interval_ms": 10}})
    modern = ModernClient(admin_server.url)
    for text in ("one", "two"):
        modern.post("tools/call", {"name": "echo", "arguments": {"text": text}})
    modern.post("prompts/get", {"name": "no-such-prompt"})
    base = admin_server.url.removesuffix("/mcp")
    browser.set_window_size(WIDTH, 900)
    browser.get(f"{base}/admin/mcp_transport/mcpcall/")
    if "login" in browser.current_url:  # the module's first test logged in already, unless run alone
        browser.find_element(By.NAME, "username").send_keys(admin_login[0])
        browser.find_element(By.NAME, "password").send_keys(admin_login[1])
        browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
        WebDriverWait(browser, 120, poll_frequency=0.2).until(lambda driver: "login" not in driver.current_url)
    # Rows are written in batches about every second: reload until both eras' are there.
    WebDriverWait(browser, 120, poll_frequency=0.5).until(
        lambda driver: {"2025-11-25", "2026-07-28"} <= {cell.text for cell in driver.find_elements(
            By.CSS_SELECTOR, "#result_list td.field-era_text")} or driver.refresh())
    _assert_fits(browser)
    _shoot(browser, shots / "admin-calls.png")

    # A call's own page: the background call of the 2025-11-25 session, with its job.
    row = next(row for row in browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
               if "2025-11-25" in row.text and "slow_job" in row.text)
    row.find_element(By.CSS_SELECTOR, "th a").click()
    WebDriverWait(browser, 120, poll_frequency=0.2).until(lambda driver: "/change/" in driver.current_url)
    page = browser.find_element(By.ID, "content").text
    assert "slow_job" in page and "tools/call" in page and "2025-11-25" in page
    _shoot(browser, shots / "admin-call.png", 1250)
