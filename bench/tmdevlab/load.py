"""The v2 workload's load (benchmark/benchmark.js of http4k/benchmark-mcp-servers-v2, a k6 script),
re-implemented with aiohttp: each virtual user loops over three full sessions (initialize,
notifications/initialized, one tools/call, DELETE), one for each tool with its content check, and a
fourth with tools/list, then thinks 50 ms. Prints one JSON line.

    python bench/tmdevlab/load.py --url http://127.0.0.1:8000/mcp --users 50 --seconds 30 --warmup 10

Counted as the benchmark counts: an iteration is one loop of the four sessions; ``mcp_rps`` the
initialize, tools/call and tools/list requests a second (not the notification or the DELETE);
``http_rps`` every request; latencies are of the tools/call requests; an error is a session whose
answer fails its check. ``--era 2026-07-28``: each session is one stateless request instead.
"""
import argparse
import asyncio
import json
import statistics
import time

import aiohttp

HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2024-11-05", "capabilities": {},
                         "clientInfo": {"name": "k6-bench", "version": "1.0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _parse(text: str):
    text = text.strip()
    if text.startswith("{"):
        return json.loads(text)
    for line in text.splitlines():  # SSE: the data line with the JSON
        if line.startswith("data:") and line[5:].strip().startswith("{"):
            return json.loads(line[5:].strip())
    return None


def _payload(answer):
    return json.loads(answer["result"]["content"][0]["text"])


def tools_for(user: str) -> list:
    """(name, arguments, check) of the three tools, as benchmark.js's makeTools."""
    return [
        ("search_products", {"category": "Electronics", "min_price": 50.0, "max_price": 500.0, "limit": 10},
         lambda d: d["total_found"] == 2251 and len(d["products"]) == 10 and len(d["top10_popular_ids"]) == 10),
        ("get_user_cart", {"user_id": user},
         lambda d: bool(d["user_id"]) and len(d["cart"]["items"]) >= 1 and len(d["recent_history"]) == 5),
        ("checkout", {"user_id": user, "items": [{"product_id": 42, "quantity": 2}, {"product_id": 1337, "quantity": 1}]},
         lambda d: d["status"] == "confirmed" and d["total"] > 0 and d["items_count"] == 2),
    ]


class Stats:
    def __init__(self, era):
        self.era = era
        self.counting = False
        self.iterations = self.mcp_requests = self.http_requests = self.errors = 0
        self.latencies = []
        self.error_kinds = {}
        self.error_samples = []

    def error(self, kind, sample=None):
        if self.counting:
            self.errors += 1
            self.error_kinds[kind] = self.error_kinds.get(kind, 0) + 1
            if sample is not None and len(self.error_samples) < 3:
                self.error_samples.append(str(sample)[:300])


async def _post(http, url, body, session_id, stats, mcp=True):
    headers = dict(HEADERS, **({"Mcp-Session-Id": session_id} if session_id else {}))
    started = time.perf_counter()
    async with http.post(url, data=json.dumps(body), headers=headers) as response:
        text = await response.text()
        elapsed = time.perf_counter() - started
        if stats.counting:
            stats.http_requests += 1
            stats.mcp_requests += mcp
        return response.headers.get("Mcp-Session-Id", session_id), (_parse(text) if text else None), elapsed


MODERN = "2026-07-28"
MODERN_META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {},
               "io.modelcontextprotocol/clientInfo": {"name": "k6-bench", "version": "1.0"}}


async def modern_request(http, url, request, stats):
    """The same request in the stateless 2026-07-28 era: one POST, everything it needs in it."""
    params = dict(request["params"], _meta=MODERN_META)
    headers = dict(HEADERS, **{"MCP-Protocol-Version": MODERN, "Mcp-Method": request["method"]})
    if "name" in params:
        headers["Mcp-Name"] = params["name"]
    started = time.perf_counter()
    async with http.post(url, data=json.dumps(dict(request, params=params)), headers=headers) as response:
        text = await response.text()
    if stats.counting:
        stats.http_requests += 1
        stats.mcp_requests += 1
    return _parse(text), time.perf_counter() - started


async def session(http, url, request, stats):
    """One full session: its request's answer and latency."""
    if stats.era == MODERN:
        return await modern_request(http, url, request, stats)
    session_id, _, _ = await _post(http, url, INITIALIZE, None, stats)
    await _post(http, url, INITIALIZED, session_id, stats, mcp=False)
    _, answer, elapsed = await _post(http, url, request, session_id, stats)
    if session_id:
        async with http.delete(url, headers={"Mcp-Session-Id": session_id}) as response:
            await response.read()
        if stats.counting:
            stats.http_requests += 1
    return answer, elapsed


async def user(number, url, stats, stop):
    user_id = f"user-{number % 1000:05d}"
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=1)) as http:
        while not stop.is_set():
            for name, arguments, check in tools_for(user_id):
                request = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": name, "arguments": arguments}}
                answer = None
                try:
                    answer, elapsed = await session(http, url, request, stats)
                    if not check(_payload(answer)):
                        stats.error(f"{name}: check", answer)
                    elif stats.counting:
                        stats.latencies.append(elapsed)
                except Exception as exc:  # noqa: BLE001 - counted, the run goes on
                    stats.error(f"{name}: {type(exc).__name__}", answer)
            try:
                answer, _ = await session(http, url, {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
                                          stats)
                if not answer["result"]["tools"]:
                    stats.error("tools/list: empty")
            except Exception as exc:  # noqa: BLE001
                stats.error(f"tools/list: {type(exc).__name__}")
            if stats.counting:
                stats.iterations += 1
            await asyncio.sleep(0.05)


def _ms(values, q):
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000, 2)


async def run(url, users, seconds, warmup, era):
    stats, stop = Stats(era), asyncio.Event()
    tasks = []
    for number in range(1, users + 1):  # ramped as k6's stage does, over a fifth of the warm-up
        tasks.append(asyncio.create_task(user(number, url, stats, stop)))
        await asyncio.sleep(warmup / 5 / users)
    await asyncio.sleep(warmup - warmup / 5)
    stats.counting, started = True, time.perf_counter()
    await asyncio.sleep(seconds)
    stats.counting, wall = False, time.perf_counter() - started
    stop.set()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {"iterations_per_s": round(stats.iterations / wall, 2), "mcp_rps": round(stats.mcp_requests / wall, 1),
            "http_rps": round(stats.http_requests / wall, 1), "errors": stats.errors, "error_kinds": stats.error_kinds,
            "error_samples": stats.error_samples,
            "sessions": stats.iterations * 4, "call_ms_p50": _ms(stats.latencies, 0.5),
            "call_ms_p99": _ms(stats.latencies, 0.99),
            "call_ms_mean": round(statistics.fmean(stats.latencies) * 1000, 2) if stats.latencies else None,
            "wall_s": round(wall, 2)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--users", type=int, default=50)
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--warmup", type=float, default=10)
    parser.add_argument("--era", default="sessions", choices=["sessions", MODERN],
                        help="sessions: the benchmark's sequence; 2026-07-28: each session one stateless request")
    args = parser.parse_args()
    try:
        import uvloop
        uvloop.install()
    except ImportError:
        pass
    print(json.dumps(asyncio.run(run(args.url, args.users, args.seconds, args.warmup, args.era))), flush=True)


if __name__ == "__main__":
    main()
