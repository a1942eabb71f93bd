"""The histograms of the OpenTelemetry semantic conventions for MCP, shared by every process
through Redis as the counters are (metrics.py), for /metrics (prometheus.py):

- ``operation``: ``mcp.server.operation.duration``, "MCP request or notification duration as
  observed on the receiver from the time it was received until the result or ack is sent", one
  observation per request the request pipeline records (running/calls.py: ``finished``), labelled
  by ``tracing.operation_labels``: (method, tool, prompt, error);
- ``session``: ``mcp.server.session.duration``, "The duration of the MCP session as observed on
  the MCP server", one observation per session whose row closes (session_rows.py), unlabelled.

Both "SHOULD be specified with ExplicitBucketBoundaries of [ 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1,
2, 5, 10, 30, 60, 120, 300 ]" (model/mcp/metrics.yaml, docs/gen-ai/mcp.md of
open-telemetry/semantic-conventions-genai): ``BOUNDS``.

Observing costs the request a dict update in the process: the housekeeping round flushes what
waits with the counters, in the round trip it makes anyway (``queue``), as HINCRBYs on one hash,
``{prefix}:histograms``. Its fields are JSON arrays, ``[histogram, *labels, slot]``: a slot is the
index of the one bucket an observation falls in (not cumulative: one HINCRBY per observation's
bucket; the scrape adds them up), or ``"sum"`` (microseconds, so that every field is an integer).
A lock guards what waits: a session's row closes on the session writer's thread.
"""
import bisect
import functools
import json
import threading
from collections import defaultdict

from ..connections import async_redis, keys

#: The upper bounds (seconds) of both histograms' buckets; one more bucket holds what is past them.
BOUNDS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 30, 60, 120, 300)
OPERATION, SESSION = "operation", "session"
#: The index of a slot's sum in what waits: after the buckets (``len(BOUNDS) + 1`` of them).
_SUM = len(BOUNDS) + 1

_lock = threading.Lock()
#: (histogram, labels) -> its bucket counts and its sum in microseconds, waiting for the next flush.
_pending = defaultdict(lambda: [0] * (_SUM + 1))


def observe(histogram: str, labels: tuple, seconds: float) -> None:
    """One observation of ``seconds`` (from any thread)."""
    seconds = max(0.0, seconds)
    bucket = bisect.bisect_left(BOUNDS, seconds)  # "le": a value on a bound is in that bound's bucket
    with _lock:
        counts = _pending[histogram, labels]
        counts[bucket] += 1
        counts[_SUM] += round(seconds * 1_000_000)


#: ``observe_operation(labels, seconds)``: a request served in ``seconds``; ``labels``:
#: ``tracing.operation_labels`` (a partial, not a function of its own: every request calls it).
observe_operation = functools.partial(observe, OPERATION)


def observe_sessions(durations) -> None:
    """Sessions that closed, each after its seconds."""
    for seconds in durations:
        observe(SESSION, (), seconds)


def waiting() -> bool:
    return bool(_pending)


def take() -> dict:
    """What waits, taken away: {(histogram, labels): its bucket counts, then its sum in µs}."""
    with _lock:
        taken = dict(_pending)
        _pending.clear()
    return taken


def queue(pipe) -> None:
    """Queue what waits on a Redis pipeline (the housekeeping round's, or ``metrics.flush``'s)."""
    key = keys().histograms()
    for (histogram, labels), counts in take().items():
        for slot, amount in enumerate(counts):
            if amount:
                pipe.hincrby(key, _field(histogram, labels, "sum" if slot == _SUM else slot), amount)


def _field(histogram, labels, slot) -> str:
    return json.dumps([histogram, *labels, slot], separators=(",", ":"))


async def read() -> dict:
    """{histogram: {labels: (bucket counts, sum in seconds)}} of every process, what this one has
    not flushed yet included: the counts per bucket, not cumulative, the last past every bound."""
    raw = await async_redis().hgetall(keys().histograms())
    found = defaultdict(dict)
    for field, value in raw.items():
        histogram, *labels, slot = json.loads(field)
        _add(found, histogram, tuple(labels), slot, int(value))
    with _lock:
        pending = [(key, list(counts)) for key, counts in _pending.items()]
    for (histogram, labels), counts in pending:
        for slot, amount in enumerate(counts):
            _add(found, histogram, labels, "sum" if slot == _SUM else slot, amount)
    return {histogram: {labels: (counts[:_SUM], counts[_SUM] / 1_000_000) for labels, counts in series.items()}
            for histogram, series in found.items()}


def _add(found, histogram, labels, slot, amount) -> None:
    counts = found[histogram].get(labels)
    if counts is None:
        counts = found[histogram][labels] = [0] * (_SUM + 1)
    if slot == "sum":
        counts[_SUM] += amount
    elif isinstance(slot, int) and 0 <= slot < _SUM:
        counts[slot] += amount
