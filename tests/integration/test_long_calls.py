"""Long calls as real clients make them, with the official Python SDK client (`mcp`) against a real
daphne process, in both eras:

- a 150 s inline call with progress every 10 s settles to its result, the progress arriving as
  the tool reports it;
- a call that is silent for 40 s (no progress asked for) still sends a byte at least every
  ``KEEPALIVE_SECONDS`` (15): no proxy between client and server sees 30 s of silence and cuts it
  (many cut at 30 or 60 s);
- ``initialize`` arriving after a successful ``server/discover`` on the same endpoint (what
  Claude Code does) gets a 2025-11-25 session that works.

The first two take minutes of waiting, not of work: each test of this file goes to whichever
parallel worker is free (``SPREAD`` in tests/conftest.py), and the file's tests go out first
(``LONG_SCOPES``). They wait for the call's end, never for a duration.
"""
import time

import httpx2
import pytest
from mcp import Client, ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import MCP_DEFAULT_SSE_READ_TIMEOUT, MCP_DEFAULT_TIMEOUT

pytestmark = [pytest.mark.asyncio, pytest.mark.filterwarnings("ignore:The logging capability is deprecated")]

#: What many proxies and load balancers allow a response to stay silent before they cut it.
PROXY_IDLE_SECONDS = 30


class SilenceMeter(httpx2.AsyncBaseTransport):
    """The client's HTTP transport, measuring what a proxy on the way would see: for every
    response, the longest time without a byte from the server, from the request's sending to its
    headers, between its body's chunks, and to its end (or to the client's closing it)."""

    def __init__(self):
        self.inner = httpx2.AsyncHTTPTransport()
        self.longest = 0.0
        self.responses = 0

    async def handle_async_request(self, request):
        clock = [time.monotonic()]
        response = await self.inner.handle_async_request(request)
        self._heard(clock)
        self.responses += 1
        response.stream = _Timed(response.stream, self, clock)
        return response

    def _heard(self, clock):
        now = time.monotonic()
        self.longest = max(self.longest, now - clock[0])
        clock[0] = now

    async def aclose(self):
        await self.inner.aclose()


class _Timed(httpx2.AsyncByteStream):
    def __init__(self, stream, meter, clock):
        self.stream, self.meter, self.clock = stream, meter, clock

    async def __aiter__(self):
        async for chunk in self.stream:
            self.meter._heard(self.clock)
            yield chunk
        self.meter._heard(self.clock)

    async def aclose(self):
        self.meter._heard(self.clock)
        await self.stream.aclose()


def metered_client(url, meter, mode):
    """The SDK's client over an HTTP client whose transport is ``meter``, with the timeouts the
    SDK gives its own (30 s, 300 s to read a stream)."""
    http = httpx2.AsyncClient(transport=meter, timeout=httpx2.Timeout(MCP_DEFAULT_TIMEOUT,
                                                                      read=MCP_DEFAULT_SSE_READ_TIMEOUT))
    return http, Client(streamable_http_client(url, http_client=http), mode=mode)


@pytest.mark.parametrize("mode, version", [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_a_150_s_inline_call_with_progress_every_10_s(mcp_server, mode, version):
    arrivals = []

    async def on_progress(progress, total, message):
        arrivals.append((time.monotonic(), progress, total))

    meter = SilenceMeter()
    http, client = metered_client(mcp_server.url, meter, mode)
    async with http, client:
        assert client.protocol_version == version
        began = time.monotonic()
        result = await client.call_tool("slow_progress", {"steps": 15, "interval_ms": 10_000},
                                        progress_callback=on_progress)
        ended = time.monotonic()
    assert result.is_error is not True and result.content[0].text == "done 15"
    assert ended - began >= 150
    assert [(progress, total) for _, progress, total in arrivals] == [(step, 15) for step in range(1, 16)]
    # The reports reached the client as the tool made them (10 s apart), not all with the result:
    # the first about 140 s before it, the eighth about 70 s (wide bounds: a busy machine).
    assert ended - arrivals[0][0] > 100 and ended - arrivals[7][0] > 40, [t - began for t, _, _ in arrivals]
    assert meter.longest < PROXY_IDLE_SECONDS, meter.longest


@pytest.mark.parametrize("mode, version", [("auto", "2026-07-28"), ("legacy", "2025-11-25")])
async def test_a_silent_40_s_call_keeps_its_response_alive(mcp_server, mode, version):
    """No progressToken: the tool's reports send nothing, and for 40 s only keep-alives (every
    KEEPALIVE_SECONDS, 15 s by default) tell a proxy the response lives."""
    meter = SilenceMeter()
    http, client = metered_client(mcp_server.url, meter, mode)
    async with http, client:
        assert client.protocol_version == version
        began = time.monotonic()
        result = await client.call_tool("slow_progress", {"steps": 4, "interval_ms": 10_000})
        took = time.monotonic() - began
    assert result.is_error is not True and result.content[0].text == "done 4"
    assert took >= 40 > PROXY_IDLE_SECONDS
    assert meter.longest < PROXY_IDLE_SECONDS, meter.longest


async def test_initialize_after_server_discover_gets_a_working_session(mcp_server, celery_worker):
    """What Claude Code does: it probes ``server/discover`` (answered: 2026-07-28 is served here)
    and then sends ``initialize`` anyway. Both reach the one endpoint; the handshake makes a
    2025-11-25 session whose calls, inline and background, work."""
    seen = []

    async def on_progress(progress, total, message):
        seen.append(progress)

    async with streamable_http_client(mcp_server.url) as (read, write):
        async with ClientSession(read, write) as session:
            discovered = await session.send_discover("2026-07-28")
            assert "2026-07-28" in discovered["supportedVersions"]
            initialized = await session.initialize()
            assert initialized.protocol_version == "2025-11-25"
            echoed = await session.call_tool("echo", {"text": "after discover"})
            slow = await session.call_tool("slow_job", {"steps": 3, "interval_ms": 10}, progress_callback=on_progress)
    assert echoed.structured_content == {"result": "after discover"}
    assert slow.content[0].text == "done 3" and seen == [1, 2, 3]
