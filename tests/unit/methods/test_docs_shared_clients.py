"""docs/tools.md, "Clients shared across calls": its Redis example is the example project's module
as it is, and its HTTP example works as printed: two calls of ``forecast`` on one loop reach a
real HTTP server over one kept-alive connection."""
import asyncio
import http.server
import json
import re
import threading
from pathlib import Path

import pytest
from django.test import override_settings

from mcp_transport.methods.registry import registry

ROOT = Path(__file__).resolve().parents[3]
SECTION = (ROOT / "docs" / "tools.md").read_text().split("## Clients shared across calls", 1)[1]
BLOCKS = re.findall(r"```python\n(.*?)```", SECTION, re.S)


def test_the_redis_example_is_the_example_projects_module():
    assert BLOCKS[0] == (ROOT / "tools" / "mcp_tools" / "shared_clients.py").read_text()


class _Forecasts(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as a real API's server
    connections = set()

    def do_GET(self):
        self.connections.add(self.client_address)
        body = json.dumps({"summary": "sunny in " + self.path.rsplit("=", 1)[1]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


@pytest.fixture
def forecasts():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Forecasts)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_the_http_example_shares_one_client_across_calls(forecasts, monkeypatch):
    monkeypatch.setattr(registry, "tools", dict(registry.tools))  # the page's @tool registers here
    page = {}
    exec(BLOCKS[1], page)
    assert "forecast" in registry.tools

    async def two_calls():
        answers = [await page["forecast"]("Paris"), await page["forecast"]("Oslo")]
        made = page["weather_api"].made()
        for client in made:  # what a shutdown hook does
            await client.close()
        return answers, made

    with override_settings(WEATHER_API_URL=forecasts):
        answers, made = asyncio.run(two_calls())
    assert answers == ["sunny in Paris", "sunny in Oslo"]
    assert len(made) == 1 and len(_Forecasts.connections) == 1  # one client, one kept-alive connection
