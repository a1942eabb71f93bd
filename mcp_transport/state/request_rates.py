"""How many requests of any method one caller may make (``REQUEST_RATE_LIMIT``), one budget shared
by every process through Redis: a token bucket per caller (rates.TAKE_FUNCTION), taken by every
request the pipeline serves, whichever era and transport carried it (running/pipeline.py), before
anything else is done for it. A ``tools/call`` takes one of these and its place in its RATE_LIMIT
window (rates.py) besides. The caller is quotas.caller_key's: its principal, else its client
address; one with neither (stdio started without ``--user``) is not limited.

Every request passes here, so a process does not ask Redis for each one: it takes a caller's
tokens a few at a time (``Lease``) and hands them out from memory while they are fresh
(``CALLER_COUNT_MEMORY_SECONDS``, 1 s by default; 0: one take per request). A caller's first
request takes one token; a caller whose tokens ran out while they were fresh takes twice as many
as last time, up to a twentieth of its bucket (``LEASE_SHARE``). So a slow caller is counted
exactly, and a busy one costs one round trip per many requests (a rate of N per minute: at most
one per N/20 requests, after the first few). Tokens are spent from the shared bucket when they
are taken, so no caller gets past its rate over all processes. Tokens a process took and did
not hand out while they were fresh go back to the bucket with its next take for the caller (in
the same script call); if the caller does not come back, they come back as any token does,
within a twentieth of a period.

A refusal is remembered until the next token is back, when it would be anyway (another process
can only take tokens meanwhile): a client hammering at its limit costs Redis nothing more.
"""
import time
from collections import OrderedDict
from typing import Optional

from . import metrics, quotas, rates
from ..conf import get_config, per_config
from ..connections import keys
from ..protocol.errors import LimitReached

TAKE_LUA = rates.TAKE_FUNCTION + "return take_tokens(KEYS[1], 1)"

#: The most tokens a process takes at once: a bucket's N over this.
LEASE_SHARE = 20
#: Callers whose tokens a process keeps (the least recently renewed go first).
LEASES_KEPT = 10_000


@per_config
def configured() -> Optional[rates.Rate]:
    """REQUEST_RATE_LIMIT as a Rate, or None."""
    text = get_config()["REQUEST_RATE_LIMIT"]
    return rates.parse(text) if text else None


class Lease:
    """A caller's tokens this process took and has not handed out yet."""

    __slots__ = ("left", "taken", "fresh_until", "refused_until")

    def __init__(self):
        self.left = self.taken = 0
        #: time.monotonic() until which ``left`` may be handed out, and until a refusal holds.
        self.fresh_until = self.refused_until = 0.0


_leases = OrderedDict()  # caller key -> Lease


async def admit(caller: str) -> None:
    """Take one of ``caller``'s tokens (a quotas.caller_key, or "" for a caller that is not
    limited), or raise LimitReached: 429 with Retry-After, counted as ``request_rate``."""
    rate = configured()
    if rate is None or not caller:
        return
    lease, now = _leases.get(caller), time.monotonic()
    if lease is not None:
        if lease.left and now < lease.fresh_until:
            lease.left -= 1
            return
        if now < lease.refused_until:
            raise refusal(rate, lease.refused_until - now)
    await _take(caller, rate, lease, now)


async def _take(caller: str, rate: rates.Rate, lease: Optional[Lease], now: float) -> None:
    """One round trip for this request's token and the next few (``Lease``)."""
    fresh_for = get_config()["CALLER_COUNT_MEMORY_SECONDS"] or 0
    busy = lease is not None and fresh_for > 0 and now < lease.fresh_until  # its tokens went while fresh
    wanted = min(max(1, rate.calls // LEASE_SHARE), 2 * lease.taken) if busy else 1
    stale = 0
    if lease is not None and not busy:  # before the await: another request cannot give them back too
        stale, lease.left = lease.left, 0
    taken = await quotas.script(TAKE_LUA)(keys=[keys().request_rate(caller)],
                                          args=rates.take_args(rate, wanted, given_back=stale))
    lease = _kept(caller)
    now = time.monotonic()
    if taken < 0:  # -(ms until a token is back)
        lease.refused_until = now - taken / 1000
        raise refusal(rate, -taken / 1000)
    # One goes to this request; tokens another request of the caller took meanwhile are kept too.
    lease.left, lease.taken, lease.fresh_until = lease.left + taken - 1, taken, now + fresh_for


def _kept(caller: str) -> Lease:
    lease = _leases.pop(caller, None) or Lease()
    _leases[caller] = lease  # the most recently renewed last
    if len(_leases) > LEASES_KEPT:
        _leases.popitem(last=False)
    return lease


def refusal(rate: rates.Rate, wait: float) -> LimitReached:
    """The 429 of a request over REQUEST_RATE_LIMIT: one sentence naming the limit."""
    metrics.incr("limit_refusals:request_rate")
    seconds = rates.token_retry_after(wait, rate)
    return LimitReached(f"This client has made its {rate.calls} requests per {rate.period} "
                        f"(REQUEST_RATE_LIMIT {rate.text}): retry in {seconds} s.", retry_after=seconds)
