"""The admin dashboard: the seed's signals as current values and as charts over time.

Values come from the counters (metrics.py) read now; charts from the samples (samples.py).
Counters are running totals, so most charts show per-minute rates: the difference between two
neighbouring samples over the time between them (a negative difference is a counter reset,
drawn as a gap).
"""
from dataclasses import dataclass

from ..methods.registry import registry
from ..state import rates
from .charts import Series, line_chart

REPLAY_HITS = ("replay_hits:redis", "replay_hits:database", "replay_hits:memory")
REPLAY_FAILURES = ("replay_failures:unknown", "replay_failures:evicted")
EVICTIONS = ("capacity", "ttl", "session_cap")


@dataclass
class Card:
    label: str
    value: str
    detail: str = ""


def total(counters: dict, names) -> int:
    return sum(int(counters.get(name, 0)) for name in names)


def share(part: float, whole: float) -> str:
    return f"{part / whole:.0%}" if whole else "–"


def cards(now: dict) -> list:
    """The headline numbers, from a ``samples.current()`` reading."""
    store = now.get("store", {})
    hits, failures = total(now, REPLAY_HITS), total(now, REPLAY_FAILURES)
    gets, resumes = now.get("get_requests", 0), now.get("get_resumes", 0)
    evicted = store.get("evicted", {})
    return [
        Card("Reconnects (GET)", f"{gets:,}", f"{share(resumes, gets)} with Last-Event-ID ({resumes:,})"),
        Card("Replays", f"{hits:,} ok", f"{failures:,} failed: {now.get('replay_failures:unknown', 0):,} unknown, "
                                        f"{now.get('replay_failures:evicted', 0):,} evicted"),
        Card("Replay hit rate", share(hits, hits + failures),
             f"from Redis {now.get('replay_hits:redis', 0):,}, from the database {now.get('replay_hits:database', 0):,}"),
        Card("Buffered events", f"{store.get('buffer_entries', now.get('buffer_entries', 0)):,}",
             f"{store.get('events_appended', now.get('events_appended', 0)):,} appended in all"),
        Card("Evictions", f"{sum(evicted.values()):,}",
             ", ".join(f"{reason.replace('_', ' ')} {evicted.get(reason, 0):,}" for reason in EVICTIONS)),
        Card("Sessions expired", f"{now.get('sessions_closed:expired', 0):,}",
             f"{now.get('sessions_created', 0):,} created, {now.get('sessions_closed:deleted', 0):,} deleted, "
             f"{now.get('sessions_closed:terminated', 0):,} terminated"),
        Card("Open streams", f"{now.get('open_streams', 0):,}",
             f"max {now.get('open_streams_max_per_session', 0)} per session, "
             f"{now.get('sessions_with_open_streams', 0):,} sessions streaming"),
        Card("Orphans answered", f"{now.get('orphans_answered', 0):,}",
             f"{now.get('resume_takeovers', 0):,} resume takeovers"),
    ]


def rate_card(now: dict, setting, own_rates: dict) -> Card:
    """RATE_LIMIT (tools/call per caller per window), the tools with a rate of their own
    (name -> Rate, None: not limited) and the calls refused over them."""
    own = ", ".join(f"{name} {rate.text if rate else 'unlimited'}" for name, rate in sorted(own_rates.items()))
    refused = f"{int(now.get('limit_refusals:rate', 0)):,} calls refused"
    return Card("Rate limit per caller", setting or "none", f"{refused}; own limits: {own}" if own else refused)


def tool_rates() -> dict:
    """The tools that declare ``@tool(rate_limit=...)``: name -> Rate, or None (not limited)."""
    return {name: spec.rate_limit for name, spec in registry.tools.items() if spec.rate_limit is not rates.SETTING}


def per_minute(samples: list, names) -> list:
    """The summed counters' rate between each sample and the one before (None for the first)."""
    rates = [None]
    for before, after in zip(samples, samples[1:]):
        delta, seconds = total(after, names) - total(before, names), after["t"] - before["t"]
        rates.append(delta / seconds * 60 if delta >= 0 and seconds > 0 else None)
    return rates


def ratio_per_interval(samples: list, part_names, whole_names) -> list:
    """part / whole (as a percentage) of what happened between neighbouring samples."""
    ratios = [None]
    for before, after in zip(samples, samples[1:]):
        whole = total(after, whole_names) - total(before, whole_names)
        part = total(after, part_names) - total(before, part_names)
        ratios.append(part / whole * 100 if whole > 0 and 0 <= part <= whole else None)
    return ratios


def gauge(samples: list, name: str) -> list:
    return [sample.get(name, 0) for sample in samples]


def charts(samples: list) -> list:
    """(title, SVG) of every chart, from samples oldest first."""
    times = [sample["t"] for sample in samples]
    plots = [
        ("Reconnects per minute", [Series("GET requests", per_minute(samples, ["get_requests"])),
                                   Series("with Last-Event-ID", per_minute(samples, ["get_resumes"]))], ""),
        ("Share of reconnects with Last-Event-ID", [
            Series("share", ratio_per_interval(samples, ["get_resumes"], ["get_requests"]))], "%"),
        ("Replays per minute", [Series("succeeded", per_minute(samples, REPLAY_HITS), "#009E73"),
                                Series("failed: unknown id", per_minute(samples, ["replay_failures:unknown"]), "#D55E00"),
                                Series("failed: evicted", per_minute(samples, ["replay_failures:evicted"]), "#E69F00")], ""),
        ("Replay hit rate", [Series("hits / replays", ratio_per_interval(
            samples, REPLAY_HITS, REPLAY_HITS + REPLAY_FAILURES), "#009E73")], "%"),
        ("Buffered events", [Series("buffer entries", gauge(samples, "buffer_entries"))], ""),
        ("Evictions per minute, by reason", [
            Series(reason.replace("_", " "), per_minute(samples, [f"events_evicted:{reason}"])) for reason in EVICTIONS], ""),
        ("Sessions per minute", [Series("created", per_minute(samples, ["sessions_created"])),
                                 Series("expired", per_minute(samples, ["sessions_closed:expired"])),
                                 Series("deleted", per_minute(samples, ["sessions_closed:deleted"])),
                                 Series("terminated", per_minute(samples, ["sessions_closed:terminated"]))], ""),
        ("Concurrent streams", [Series("open streams", gauge(samples, "open_streams")),
                                Series("max per session", gauge(samples, "open_streams_max_per_session")),
                                Series("sessions streaming", gauge(samples, "sessions_with_open_streams"))], ""),
    ]
    return [(title, line_chart(times, series, unit)) for title, series, unit in plots]


def job_cards(running: int, found: dict) -> list:
    """Job signals for the charted period (admin/jobs.py ``activity()``)."""
    finished = found["finished"]
    done = sum(finished.values())
    run, wait = found["mean_run"], found["mean_wait"]
    return [
        Card("Jobs running", f"{running:,}", "queued, working or waiting for input"),
        Card("Jobs finished", f"{done:,}", ", ".join(f"{status} {count:,}" for status, count in finished.items())
             + " in the charted period"),
        Card("Job latency", "–" if run is None else f"{run:.1f} s",
             "mean run time; queue wait " + ("–" if wait is None else f"{wait:.2f} s")),
    ]
