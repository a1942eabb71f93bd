"""The limits under load: 10,000 sessions and 2,000 held streams with the default settings.

    .venv/bin/python bench/limits.py [--sessions 10000] [--streams 2000] [--probes 500]

Starts its own redis-server (the embedded one, so that INFO memory is this run's alone), a
SQLite database and one daphne process with the default MCP_TRANSPORT limits. Then:

1. a probe: ``--probes`` sequential ``tools/call echo`` (JSON replies) on an idle server;
2. opens ``--sessions`` sessions (initialize + initialized) from 10 loopback addresses
   (127.0.0.2-11: MAX_SESSIONS_PER_ADDRESS is 1,000 by default) and holds ``--streams`` of
   their GET streams open;
3. the probe again while, at the same time, abusive clients push on every limit: one address
   asks for 1,200 sessions, one session starts 100 calls at once, 20 calls echo 2 MiB over SSE,
   20 clients declare 1 GiB bodies, 20 trickle a byte a second;
4. Redis INFO memory before, with the sessions, and after the abuse; the refusals counted.

Prints one JSON object. Loopback only; aiohttp and the stdlib.
"""
import argparse
import asyncio
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import redis

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from mcp_transport.testing import LiveServer, free_port  # noqa: E402
from mcpserver.embedded_redis import EmbeddedRedis  # noqa: E402

ACCEPT = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
ADDRESSES = [f"127.0.0.{n}" for n in range(2, 12)]


class QuietServer(LiveServer):
    """daphne without access logs (``-v 0``) and with a deep listen queue, as deployed."""

    def start(self, timeout=30.0):
        self.port = free_port()
        daphne = Path(sys.executable).with_name("daphne")
        self._spawn([str(daphne), "-v", "0", "-e", f"tcp:port={self.port}:interface=127.0.0.1:backlog=4096",
                     self.application], "daphne-")
        self._wait_until_listening(timeout)
        return self


def start():
    store = EmbeddedRedis().start()
    db = Path(tempfile.mkdtemp(prefix="bench-limits-")) / "db.sqlite3"
    env = {"REDIS_URL": store.url, "MCP_KEY_PREFIX": f"benchlimits{secrets.token_hex(3)}",
           "DATABASE_URL": f"sqlite:///{db}", "DJANGO_SETTINGS_MODULE": "mcpserver.settings",
           "PYTHONPATH": str(ROOT), "CELERY_QUEUE": "bench-limits-none",
           "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
           # 10 addresses open 10,000 sessions: the limits this measures are the ones above (the
           # per-caller rates have their own, bench/hostile_rates.py).
           "MCP_REQUEST_RATE_LIMIT": "off", "MCP_SESSION_OPEN_RATE": "off"}
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT,
                   env={**os.environ, **env}, check=True)
    server = QuietServer(env=env, cwd=ROOT).start()
    return store, server


async def open_session(http, url):
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench-limits", "version": "0"}}}
    async with http.post(url, json=init, headers=ACCEPT) as reply:
        await reply.read()
        if reply.status != 200:
            return reply.status
        session = reply.headers["mcp-session-id"]
    headers = {**ACCEPT, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    async with http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers):
        pass
    return headers


async def gated(gate, coroutine):
    async with gate:
        return await coroutine


async def hold_stream(http, url, headers, opened):
    response = await http.get(url, headers={**headers, "Accept": "text/event-stream"})
    await response.content.readuntil(b"\n\n")  # the priming event: the stream is live
    opened.append(response)


async def call(http, url, headers, name, arguments, accept=None, request_id=1):
    body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
            "params": {"name": name, "arguments": arguments}}
    async with http.post(url, json=body, headers={**headers, **({"Accept": accept} if accept else {})}) as reply:
        await reply.read()
        return reply.status


async def probe(http, url, headers, count):
    """Sequential echo calls; latencies in ms."""
    latencies = []
    for n in range(count):
        started = time.perf_counter()
        assert await call(http, url, headers, "echo", {"text": f"probe {n}"}, accept="application/json") == 200
        latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def summary(latencies):
    ordered = sorted(latencies)
    return {"n": len(ordered), "p50_ms": round(statistics.median(ordered), 2),
            "p99_ms": round(ordered[max(0, int(len(ordered) * 0.99) - 1)], 2), "max_ms": round(ordered[-1], 2)}


def redis_memory(client):
    info = client.info("memory")
    return {"used_memory_mb": round(info["used_memory"] / 2 ** 20, 1), "keys": client.dbsize()}


# -- the abusive clients ---------------------------------------------------------------------

async def session_flood(url):
    """1,200 sessions asked from one address: MAX_SESSIONS_PER_ADDRESS (1,000) lets 1,000 in."""
    connector = aiohttp.TCPConnector(limit=50, local_addr=("127.0.0.50", 0))
    async with aiohttp.ClientSession(connector=connector) as http:
        gate = asyncio.Semaphore(50)
        outcomes = await asyncio.gather(*(gated(gate, open_session(http, url)) for _ in range(1200)))
    return {"admitted": sum(isinstance(o, dict) for o in outcomes), "refused_429": outcomes.count(429)}


async def call_flood(http, url, headers):
    """100 calls at once in one session (5 s each): MAX_CALLS_PER_SESSION (32) runs 32."""
    statuses = await asyncio.gather(*(call(http, url, headers, "slow_progress", {"steps": 1, "interval_ms": 5000},
                                           request_id=n) for n in range(100)))
    return {"admitted": statuses.count(200), "refused_429": statuses.count(429)}


async def big_echoes(http, url, headers):
    """2 MiB echoes over SSE: MAX_EVENT_BYTES (1 MiB) keeps them out of Redis."""
    text = "b" * (2 * 2 ** 20)
    statuses = await asyncio.gather(*(call(http, url, headers, "echo", {"text": text},
                                           accept="text/event-stream, application/json") for _ in range(20)))
    return {"answered": statuses.count(200)}


def raw_refusal(port, payload, trickle=False):
    """Send ``payload`` (all at once, or a byte a second); the status line that comes back."""
    with socket.create_connection(("127.0.0.1", port), timeout=120) as sock:
        if trickle:
            sock.setblocking(False)
            for byte in payload:
                try:
                    data = sock.recv(4096)
                    return data.split(b" ", 2)[1].decode() if data else "closed"
                except BlockingIOError:
                    pass
                sock.send(bytes([byte]))
                time.sleep(1)
            sock.setblocking(True)
        else:
            sock.sendall(payload)
        data = sock.recv(4096)
        return data.split(b" ", 2)[1].decode() if data else "closed"


async def raw_abuse(port):
    loop = asyncio.get_running_loop()
    declared = (b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: 1073741824\r\n\r\n" + b"{" * 65536)
    slow = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n"
    huge = [loop.run_in_executor(None, raw_refusal, port, declared) for _ in range(20)]
    trickling = [loop.run_in_executor(None, raw_refusal, port, slow, True) for _ in range(20)]
    return {"declared_1gib": sorted(await asyncio.gather(*huge)), "trickling": sorted(await asyncio.gather(*trickling))}


async def run(options, server, client):
    url = server.url
    result = {"settings": "defaults", "sessions": options.sessions, "streams": options.streams}
    result["redis_before"] = redis_memory(client)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as http:
        prober = await open_session(http, url)
        result["probe_idle"] = summary(await probe(http, url, prober, options.probes))
    connectors = [aiohttp.TCPConnector(limit=0, local_addr=(address, 0)) for address in ADDRESSES]
    clients = [aiohttp.ClientSession(connector=c, timeout=aiohttp.ClientTimeout(total=None)) for c in connectors]
    try:
        gate, started = asyncio.Semaphore(100), time.monotonic()
        sessions = await asyncio.gather(*(gated(gate, open_session(clients[n % len(clients)], url))
                                          for n in range(options.sessions)))
        result["sessions_opened"] = sum(isinstance(s, dict) for s in sessions)
        result["sessions_seconds"] = round(time.monotonic() - started, 1)
        opened = []
        await asyncio.gather(*(gated(gate, hold_stream(clients[n % len(clients)], url, sessions[n], opened))
                               for n in range(options.streams)))
        result["streams_held"] = len(opened)
        result["redis_with_sessions"] = redis_memory(client)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None)) as http:
            flooder, echoer = await open_session(http, url), await open_session(http, url)
            loaded = asyncio.gather(session_flood(url), call_flood(http, url, flooder),
                                    big_echoes(http, url, echoer), raw_abuse(server.port))
            latencies = []
            while not loaded.done() or len(latencies) < options.probes:  # for as long as the abuse lasts
                latencies += await probe(http, url, prober, 10)
            flood, calls, echoes, raw = await loaded
        result["probe_loaded"] = summary(latencies)
        result["abuse"] = {"session_flood": flood, "call_flood": calls, "big_echoes": echoes, **raw}
        result["redis_after_abuse"] = redis_memory(client)
        for response in opened:
            response.close()
    finally:
        for http in clients:
            await http.close()
    await asyncio.sleep(6)  # the counters' flush (HEARTBEAT_SECONDS)
    counts = client.hgetall(f"{server.env['MCP_KEY_PREFIX']}:metrics")
    result["refusals"] = {k.split(":", 1)[1]: int(v) for k, v in counts.items() if k.startswith("limit_refusals:")}
    return result


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sessions", type=int, default=10_000)
    parser.add_argument("--streams", type=int, default=2_000)
    parser.add_argument("--probes", type=int, default=500)
    options = parser.parse_args()
    store, server = start()
    client = redis.Redis.from_url(store.url, decode_responses=True)
    try:
        print(json.dumps(asyncio.run(run(options, server, client))))
    finally:
        server.stop()
        store.stop()


if __name__ == "__main__":
    main()
