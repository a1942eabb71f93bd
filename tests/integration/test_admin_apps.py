"""The admin's MCP Apps pages (admin/mcp_apps.py): the list of views with the tools that name
them and who may see them, and the preview of one in a sandboxed iframe with a sample
structuredContent (the preview in a real browser: test_apps_browser.py)."""
import html as html_lib
import http.client
import json
import re

PAGE = "/admin/mcp_transport/mcpsession/apps/"
PREVIEW = "/admin/mcp_transport/mcpsession/apps/preview/"


def test_the_apps_page_lists_each_view_with_its_tools_and_who_sees_it(admin):
    html = admin.page(PAGE)
    for uri in ("ui://library/book-card", "ui://library/book-editor"):
        assert f"<code>{uri}</code>" in html and f'{PREVIEW}?uri={uri.replace(":", "%3A").replace("/", "%2F")}' in html
    assert "<code>library/apps/book_card.html</code>" in html and "<code>library/apps/bridge.js</code>" in html
    assert re.search(r"<code>book_retitle</code></td><td>app</td><td>permission library.change_book</td>", html)
    assert re.search(r"<code>book_card</code></td><td>model, app</td><td>permission library.view_book</td>", html)
    assert f'href="{PAGE}">Apps</a>' in admin.page("/admin/mcp_transport/")


def test_the_preview_renders_the_view_in_a_sandboxed_iframe_with_the_sample(admin):
    html = admin.page(PREVIEW, uri="ui://library/book-card")
    frame = re.search(r'<iframe id="mcp-app-preview" title="[^"]*" sandbox="allow-scripts" srcdoc="([^"]*)"', html)
    assert frame, html[:3000]
    document = html_lib.unescape(frame.group(1))
    assert document.startswith("<!DOCTYPE html>") and "ui/notifications/tool-result" in document
    # The host listens before the view exists: its ui/initialize may come as soon as the iframe is
    # parsed, before a script after it has loaded (a lost handshake leaves the view empty).
    assert html.index("mcp_transport/app_preview.js") < html.index('<iframe id="mcp-app-preview"')
    sample = json.loads(re.search(r'<script id="mcp-app-sample" type="application/json">(.*?)</script>', html).group(1))
    assert sample["title"] == "The Left Hand of Darkness"
    chosen = admin.page(PREVIEW, uri="ui://library/book-card", sample=json.dumps({"title": "Other"}))
    assert '<script id="mcp-app-sample" type="application/json">{"title": "Other"}</script>' in chosen
    refused = admin.page(PREVIEW, uri="ui://library/book-card", sample="[1")
    assert '<p class="errornote" id="mcp-app-error">The sample is not JSON:' in refused


def test_an_unknown_view_is_404_and_the_pages_need_a_staff_login(admin, admin_server):
    assert admin.get(f"{PREVIEW}?uri=ui%3A%2F%2Flibrary%2Fnope")[0] == 404
    for url in (PAGE, f"{PREVIEW}?uri=ui%3A%2F%2Flibrary%2Fbook-card"):
        connection = http.client.HTTPConnection("127.0.0.1", admin_server.port, timeout=30)
        connection.request("GET", url)
        reply = connection.getresponse()
        assert reply.status == 302 and "/admin/login/" in reply.getheader("location")
        connection.close()
