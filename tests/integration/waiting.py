"""Waiting for a condition instead of for a duration (a busy machine eats any fixed margin)."""
import time


def settled(name, deadline=60.0, every=0.5):
    """The value of the counter ``name`` (tick_job, count_inline) once it stops moving between
    two reads ``every`` seconds apart (a tool still running moves it every 50 ms), waiting at
    most ``deadline``."""
    from django.core.cache import cache

    from tools.bounds import counter_key

    key = counter_key(name)
    last, end = cache.get(key), time.monotonic() + deadline
    while time.monotonic() < end:
        time.sleep(every)
        if (now := cache.get(key)) == last:
            return now
        last = now
    return last


def eventually(check, deadline=60.0, every=0.2):
    """``check()``'s value once it stops failing an assertion, trying for at most ``deadline``
    seconds (then its last AssertionError): for what a server does a moment later, such as
    counters flushed or batched rows written."""
    end = time.monotonic() + deadline
    while True:
        try:
            return check()
        except AssertionError:
            if time.monotonic() >= end:
                raise
        time.sleep(every)
