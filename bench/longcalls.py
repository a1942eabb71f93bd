"""Many concurrent long calls: always-open SSE vs polling mode (SEP-1699), the seeds' comparison.

Each of N clients opens a session and calls ``slow_progress`` (steps x interval). In always-open
mode the server keeps each POST stream open until the result. In polling mode
(``POLL_AFTER_SECONDS=0``) the server closes each connection after what it has to send, with
``retry``, and the client comes back with GET + Last-Event-ID until it has the result. Reported:
calls that got their result and every progress event exactly once, open TCP connections to the
server (sampled from /proc/net/tcp every 200 ms), and the server's RSS.

    .venv/bin/python bench/longcalls.py --url http://127.0.0.1:8000/mcp --server-pid PID --calls 1000

Loopback only; stdlib + aiohttp (the project's dev requirements).
"""
import argparse
import asyncio
import json
import time
from urllib.parse import urlsplit

import aiohttp

ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def open_connections(port: int) -> int:
    """ESTABLISHED TCP connections whose local port is the server's (server side only)."""
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                        count += 1
        except FileNotFoundError:
            pass
    return count


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


async def read_sse(response, on_event):
    """Feed SSE events to on_event(id, data); returns the last retry value seen."""
    retry, event_id, data = None, None, []
    async for raw in response.content:
        line = raw.decode().rstrip("\r\n")
        if not line:
            if data:
                on_event(event_id, "\n".join(data))
            data = []
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))
        elif line.startswith("retry:"):
            retry = int(line[6:].strip())
    return retry


async def open_session(http, url, client_name):
    """initialize + notifications/initialized; returns the headers for the session's requests."""
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": client_name, "version": "0"}}}
    async with http.post(url, json=init, headers=ACCEPT) as reply:
        session = reply.headers["mcp-session-id"]
        await reply.read()
    headers = {**ACCEPT, "Mcp-Session-Id": session, "MCP-Protocol-Version": "2025-11-25"}
    async with http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers):
        pass
    return headers


async def one_call(http, url, args, outcome):
    headers = await open_session(http, url, "longcalls")
    progress, results, last = [], [], {"id": None}

    def on_event(event_id, data):
        last["id"] = event_id or last["id"]
        if data:
            message = json.loads(data)
            if message.get("method") == "notifications/progress":
                progress.append(message["params"]["progress"])
            elif message.get("id") == 1:
                results.append(message)

    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "slow_progress", "arguments": args, "_meta": {"progressToken": 1}}}
    async with http.post(url, json=call, headers=headers) as reply:
        retry = await read_sse(reply, on_event)
    polls = 0
    while not results and polls < 10_000:
        await asyncio.sleep((retry or 1000) / 1000)
        polls += 1
        get_headers = {**headers, "Accept": "text/event-stream", "Last-Event-ID": last["id"]}
        async with http.get(url, headers=get_headers) as reply:
            retry = await read_sse(reply, on_event) or retry
    ok = len(results) == 1 and progress == list(range(1, args["steps"] + 1))
    outcome["ok" if ok else "bad"] += 1
    outcome["polls"] += polls


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--server-pid", type=int, required=True)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--interval-ms", type=int, default=100)
    parser.add_argument("--label", default="")
    options = parser.parse_args()
    port = urlsplit(options.url).port
    outcome = {"ok": 0, "bad": 0, "polls": 0}
    samples, rss = [], [rss_mb(options.server_pid)]
    args = {"steps": options.steps, "interval_ms": options.interval_ms}
    connector = aiohttp.TCPConnector(limit=0, force_close=True)
    started = time.monotonic()
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=600)) as http:
        calls = asyncio.gather(*(one_call(http, options.url, args, outcome) for _ in range(options.calls)),
                               return_exceptions=True)
        while not calls.done():
            samples.append(open_connections(port))
            rss.append(rss_mb(options.server_pid))
            await asyncio.sleep(0.2)
        errors = [e for e in await calls if isinstance(e, BaseException)]
    summary = {"label": options.label, "calls": options.calls, "complete_exactly_once": outcome["ok"],
               "incomplete": outcome["bad"], "exceptions": len(errors), "polls_per_call": outcome["polls"] / options.calls,
               "wall_s": round(time.monotonic() - started, 1), "open_tcp_peak": max(samples, default=0),
               "open_tcp_mean": round(sum(samples) / max(1, len(samples)), 1),
               "server_rss_mb_before": round(rss[0], 1), "server_rss_mb_peak": round(max(rss), 1)}
    print(json.dumps(summary))


if __name__ == "__main__":
    asyncio.run(main())
