"""MCP Apps in a real browser (Debian's headless chromium, as the admin's browser test): the
test plays the host of the spec's postMessage protocol. It reads a view from a live daphne as the
user, loads it in <iframe sandbox="allow-scripts" srcdoc=...>, answers the view's ui/initialize,
hands it the tool's input and the tool's real result (a tools/call of the user), and sees the view
show the book; a tools/call made from inside the view is sent to the server with the user's
token, succeeds for a user with library.change_book and is refused for one without. The admin's
preview (admin/mcp_apps.py) is checked the same way."""
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.wait import WebDriverWait

from .test_admin_browser import CHROMEDRIVER, browser  # noqa: F401 (the fixture)
from .test_apps import CARD, EDITOR, client, people  # noqa: F401 (the fixture)

pytestmark = pytest.mark.skipif(CHROMEDRIVER is None, reason="needs Debian's chromium and chromium-driver")

#: The host's half, in the page that holds the iframe: it answers ui/initialize and keeps the
#: view's other requests (its tools/call) for the test to send to the server.
HOST = """
const [html] = arguments;
document.body.innerHTML = '';
window.host = {initialized: false, inbox: []};
const frame = document.createElement('iframe');
frame.id = 'view';
frame.setAttribute('sandbox', 'allow-scripts');
window.addEventListener('message', (event) => {
  if (event.source !== frame.contentWindow) return;
  const message = event.data || {};
  if (message.method === 'ui/initialize') {
    frame.contentWindow.postMessage({jsonrpc: '2.0', id: message.id, result: {
      protocolVersion: '2026-01-26', hostInfo: {name: 'selenium-host', version: '1'},
      hostCapabilities: {serverTools: {}}, hostContext: {theme: 'light', displayMode: 'inline'}}}, '*');
  } else if (message.method === 'ui/notifications/initialized') {
    window.host.initialized = true;
  } else if (message.method && message.id !== undefined) {
    window.host.inbox.push(message);
  }
});
frame.srcdoc = html;
document.body.appendChild(frame);
"""
SEND = "document.getElementById('view').contentWindow.postMessage(arguments[0], '*');"


def wait(driver, condition, what, seconds=30):
    WebDriverWait(driver, seconds, poll_frequency=0.1).until(condition, message=what)


class Host:
    """A host rendering one view for one user (``ask``: its MCP client)."""

    def __init__(self, driver, ask, uri):
        self.driver, self.ask = driver, ask
        (item,) = ask("resources/read", {"uri": uri})["result"]["contents"]
        assert item["mimeType"] == "text/html;profile=mcp-app"
        driver.get("about:blank")
        driver.execute_script(HOST, item["text"])
        wait(driver, lambda d: d.execute_script("return window.host.initialized"), "the view's initialized")

    def run_tool(self, name, arguments) -> dict:
        """What a host does for a tool with a view: the input, then the result, to the view."""
        self.notify("ui/notifications/tool-input", {"arguments": arguments})
        result = self.ask("tools/call", {"name": name, "arguments": arguments})["result"]
        self.notify("ui/notifications/tool-result", result)
        return result

    def notify(self, method, params):
        self.driver.execute_script(SEND, {"jsonrpc": "2.0", "method": method, "params": params})

    def relay_one_request(self) -> dict:
        """The view's next request, sent to the server as the user; its answer back to the view."""
        wait(self.driver, lambda d: d.execute_script("return window.host.inbox.length"), "a request of the view")
        request = self.driver.execute_script("return window.host.inbox.shift()")
        answer = self.ask(request["method"], request["params"])
        reply = {"jsonrpc": "2.0", "id": request["id"]}
        reply.update({"error": answer["error"]} if "error" in answer else {"result": answer["result"]})
        self.driver.execute_script(SEND, reply)
        return request

    def text(self, selector) -> str:
        self.driver.switch_to.frame(self.driver.find_element(By.ID, "view"))
        try:
            return self.driver.find_element(By.CSS_SELECTOR, selector).text
        finally:
            self.driver.switch_to.default_content()

    def in_view(self, act):
        self.driver.switch_to.frame(self.driver.find_element(By.ID, "view"))
        try:
            return act(self.driver)
        finally:
            self.driver.switch_to.default_content()


def test_the_book_card_shows_the_tools_result(auth_server, people, browser):  # noqa: F811
    host = Host(browser, client(auth_server, people["viewer"], "2026-07-28"), CARD)
    assert host.text("#title") == "Loading…"
    host.run_tool("book_card", {"book_id": people["book"]})
    wait(browser, lambda d: host.text("#title") == "The Dispossessed", "the book's title in the card")
    assert host.text("#author") == "Ursula K. Le Guin" and host.text("#year") == "(1974)"
    assert host.text("#genre") == "Novel"


def _save_title(host, title):
    def type_and_save(driver):
        field = driver.find_element(By.ID, "title")
        field.clear()
        field.send_keys(title)
        driver.find_element(By.ID, "save").click()
    host.in_view(type_and_save)


@pytest.mark.parametrize("version", ["2026-07-28", "2025-11-25"])
def test_a_call_from_inside_the_view_is_the_users_own(auth_server, people, browser, version):  # noqa: F811
    viewer = Host(browser, client(auth_server, people["viewer"], version), EDITOR)
    viewer.run_tool("book_editor", {"book_id": people["book"]})
    wait(browser, lambda d: viewer.in_view(lambda v: v.find_element(By.ID, "title").get_attribute("value"))
         == "The Dispossessed", "the book's title in the editor")
    _save_title(viewer, "Stolen title")
    request = viewer.relay_one_request()
    assert request["method"] == "tools/call" and request["params"] == {
        "name": "book_retitle", "arguments": {"book_id": people["book"], "title": "Stolen title"}}
    wait(browser, lambda d: "book_retitle" in viewer.text("#status"), "the refusal in the view")
    assert viewer.in_view(lambda v: v.find_element(By.ID, "status").get_attribute("class")) == "error"
    ask_editor = client(auth_server, people["editor"], version)
    card = ask_editor("tools/call", {"name": "book_card", "arguments": {"book_id": people["book"]}})["result"]
    assert card["structuredContent"]["title"] == "The Dispossessed"  # refused: nothing changed

    editor = Host(browser, ask_editor, EDITOR)
    editor.run_tool("book_editor", {"book_id": people["book"]})
    wait(browser, lambda d: editor.in_view(lambda v: v.find_element(By.ID, "save").is_enabled()), "the editor ready")
    _save_title(editor, f"The Dispossessed ({version})")
    editor.relay_one_request()
    wait(browser, lambda d: editor.text("#status") == f"Saved: The Dispossessed ({version})", "the saved title")
    card = ask_editor("tools/call", {"name": "book_card", "arguments": {"book_id": people["book"]}})["result"]
    assert card["structuredContent"]["title"] == f"The Dispossessed ({version})"
    ask_editor("tools/call", {"name": "book_retitle", "arguments": {"book_id": people["book"], "title": "The Dispossessed"}})


def test_the_admins_preview_shows_the_sample(admin_server, admin_login, browser):  # noqa: F811
    base = admin_server.url.removesuffix("/mcp")
    browser.get(f"{base}/admin/login/?next=/admin/mcp_transport/mcpsession/apps/")
    browser.find_element(By.NAME, "username").send_keys(admin_login[0])
    browser.find_element(By.NAME, "password").send_keys(admin_login[1])
    browser.find_element(By.CSS_SELECTOR, "input[type=submit]").click()
    wait(browser, lambda d: d.title.startswith("Apps"), "the apps page", 120)
    browser.find_element(By.CSS_SELECTOR, "a.mcp-preview").click()
    wait(browser, lambda d: d.title.startswith("Preview of ui://library/book-card"), "the preview page")
    frame = browser.find_element(By.ID, "mcp-app-preview")
    assert frame.get_attribute("sandbox") == "allow-scripts"
    browser.switch_to.frame(frame)
    try:
        wait(browser, lambda d: d.find_element(By.ID, "title").text == "The Left Hand of Darkness", "the sample")
        assert browser.find_element(By.ID, "author").text == "Ursula K. Le Guin"
    finally:
        browser.switch_to.default_content()
