"""Memory per open SSE stream: hold N sessions' GET streams open at once and read the server's RSS.

    .venv/bin/python bench/hold.py --url http://127.0.0.1:8000/mcp --server-pid PID --streams 5000

Each stream is a session's standalone GET stream, held idle after its priming event (the cost of
a connection waiting for a long tool's next event). Prints one JSON line: RSS before, with the
sessions open, with the streams open, and KiB per stream. Loopback only; stdlib + aiohttp.
"""
import argparse
import asyncio
import json

import aiohttp

from longcalls import open_session  # bench/ is on sys.path when this runs as a script


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


async def open_gated_session(http, url, gate):
    async with gate:
        return await open_session(http, url, "hold")


async def hold_stream(http, url, headers, gate, opened):
    async with gate:
        response = await http.get(url, headers={**headers, "Accept": "text/event-stream"})
        await response.content.readuntil(b"\n\n")  # the priming event: the stream is live
    opened.append(response)


async def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--server-pid", type=int, required=True)
    parser.add_argument("--streams", type=int, default=5000)
    parser.add_argument("--ramp", type=int, default=100, help="connections being set up at once")
    options = parser.parse_args()
    gate, opened = asyncio.Semaphore(options.ramp), []
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector, timeout=aiohttp.ClientTimeout(total=None)) as http:
        before = rss_kib(options.server_pid)
        sessions = await asyncio.gather(*(open_gated_session(http, options.url, gate) for _ in range(options.streams)))
        await asyncio.sleep(2)
        with_sessions = rss_kib(options.server_pid)
        await asyncio.gather(*(hold_stream(http, options.url, h, gate, opened) for h in sessions))
        await asyncio.sleep(2)
        with_streams = rss_kib(options.server_pid)
        for response in opened:
            response.close()
    print(json.dumps({"streams_held": len(opened), "rss_mb_before": round(before / 1024, 1),
                      "rss_mb_sessions_open": round(with_sessions / 1024, 1),
                      "rss_mb_streams_open": round(with_streams / 1024, 1),
                      "kib_per_stream": round((with_streams - with_sessions) / max(1, len(opened)), 1),
                      "kib_per_idle_session": round((with_sessions - before) / max(1, options.streams), 1)}))


if __name__ == "__main__":
    asyncio.run(main())
