"""Two callers cannot take every sync thread (issue 38, class 3; mcp_transport/methods/threads.py).

Before, a caller could hold SYNC_THREADS_PER_CALLER (4) of the SYNC_TOOL_THREADS (8): two users
(two client addresses here) flooding slow sync tools held all eight, and a third user's sync
``whoami`` waited for one of their calls to end (2 ms became 8 s with 8 s calls, for ever with
calls that do not end). Now a caller that runs sync code already never takes a lane's last free
thread: one is always left for a caller that runs none.

On a real daphne, each hog floods three 2025-11-25 sessions with ``count_inline`` calls that run
until the test ends them (a session's DELETE cancels its calls): the victim's sync calls, in
both eras, are answered while every hog call is still running. Conditions, not timings.
"""
import concurrent.futures
import json
import secrets
import time

import pytest
from django.core.cache import cache

from tools.bounds import counter_key

from .addresses import ClientAt, ModernClientAt

#: How long a condition may take on a loaded machine, not a measured figure.
DEADLINE = 60.0
#: Sessions per hog, and calls per session: more than the caller's share (4 threads) asks for.
SESSIONS, CALLS = 3, 2


@pytest.fixture(scope="module")
def server(start_server):
    """Callers told apart by their address (X-Forwarded-For from the trusted proxy)."""
    return start_server(MCP_TRANSPORT_JSON=json.dumps({"TRUSTED_PROXIES": ["127.0.0.1"], "KEEPALIVE_SECONDS": 0.5}))


class Hog:
    """A caller (an address) whose sessions run count_inline calls that end only when cancelled."""

    def __init__(self, server, address):
        self.name = f"hog-{secrets.token_hex(4)}"
        self.sessions, self.streams, self.counters = [], [], []
        for _ in range(SESSIONS):
            session = ClientAt(server.url, address)
            session.initialize()
            self.sessions.append(session)

    def flood(self):
        for number, session in enumerate(self.sessions):
            for call in range(CALLS):
                counter = f"{self.name}-{number}-{call}"
                arguments = {"key": counter, "steps": 100_000, "interval_ms": 50}
                message = session.message("tools/call", {"name": "count_inline", "arguments": arguments})
                self.streams.append(session.stream("POST", message, timeout=DEADLINE))
                self.counters.append(counter)

    def running(self) -> int:
        """How many of its calls have counted (run in a thread) so far."""
        return sum(cache.get(counter_key(counter)) is not None for counter in self.counters)

    def counts(self) -> list:
        return [cache.get(counter_key(counter)) for counter in self.counters]

    def stop(self):
        for session in self.sessions:
            session.delete()  # cancels the session's calls: their threads end
        for stream in self.streams:
            stream.close()


def wait_for(condition, what):
    end = time.monotonic() + DEADLINE
    while not condition():
        assert time.monotonic() < end, f"waited {DEADLINE:g} s for {what}"
        time.sleep(0.05)


def answer_of(reply) -> dict:
    if reply.content_type != "text/event-stream":
        return reply.json
    lines = reply.body.decode().splitlines()
    return json.loads([line[len("data: "):] for line in lines if line.startswith("data: ")][-1])


@pytest.fixture
def hogs(server):
    first, second = Hog(server, "10.38.0.1"), Hog(server, "10.38.0.2")
    try:
        first.flood()
        wait_for(lambda: first.running() == 4, "the first hog's share of the tool threads")  # SYNC_THREADS_PER_CALLER
        second.flood()
        # It gets what is free but one (3): the last free thread is left for another caller.
        wait_for(lambda: second.running() >= 3, "the second hog's calls to run")
        yield first, second
    finally:
        for hog in (first, second):
            hog.stop()


def within_deadline(ask):
    """``ask()``'s value, which must come within DEADLINE: a stalled call's SSE keep-alives would
    keep a plain read waiting for as long as the hogs run."""
    pool = concurrent.futures.ThreadPoolExecutor(1)
    try:
        return pool.submit(ask).result(timeout=DEADLINE)
    except concurrent.futures.TimeoutError:
        raise AssertionError(f"no answer within {DEADLINE:g} s: the victim waits behind the hogs") from None
    finally:
        pool.shutdown(wait=False)


def test_a_third_callers_sync_calls_run_while_two_callers_flood_the_tool_threads(server, hogs):
    victim = ClientAt(server.url, "10.38.0.3")
    victim.initialize()
    counts = [hog.counts() for hog in hogs]
    started = time.monotonic()
    reply = within_deadline(lambda: victim.call("tools/call", {"name": "whoami", "arguments": {}}))
    modern = within_deadline(lambda: answer_of(ModernClientAt(server.url, "10.38.0.4").post(
        "tools/call", {"name": "whoami", "arguments": {}}, timeout=DEADLINE)))
    waited = time.monotonic() - started
    print(f"\nthe victims' two whoami calls took {waited * 1000:.0f} ms while the hogs ran "
          f"{[hog.running() for hog in hogs]} calls")
    assert reply["result"]["content"][0]["text"] == "anonymous", reply
    assert modern["result"]["content"][0]["text"] == "anonymous", modern
    # ... while the hogs' calls still run (they end only when the test cancels them) ...
    for hog, before in zip(hogs, counts):
        wait_for(lambda: all(now > then for now, then in zip(hog.counts(), before) if then is not None),
                 "the hogs' calls to count on")
    # ... and the second hog got no more than the lane's free threads but one.
    assert [hog.running() for hog in hogs] == [4, 3]
