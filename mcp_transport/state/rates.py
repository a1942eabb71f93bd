"""Rate limits: how many ``tools/call`` requests one caller may make per window (``RATE_LIMIT``,
or a tool's own ``@tool(rate_limit=...)``), one budget shared by every process through Redis.

A caller is its principal (``user:<pk>``, ``client:<id>``: every token of one user shares its
budget), else its client address (TRUSTED_PROXIES honoured), as quotas.caller_key has it; a
caller with neither (stdio started without ``--user``) is not limited. A tool with a rate of its
own is counted on its own (its calls do not count against RATE_LIMIT).

The window slides: a sorted set per caller (and per tool with its own rate) holds an entry for
each call it let through in the last window, scored by its time (ms). A call passes when fewer
than N entries are left once the older ones are dropped, so exactly N calls pass in any window
of that length, whatever process serves them; a refused call adds nothing and is told when the
oldest entry leaves (``Retry-After``, 1..window seconds). One busy caller keeps at most N small
entries.

The check costs no round trip of its own: it is a Lua function (``CHARGE_FUNCTION``) called by
the script the call's admission runs anyway, in the same atomic step: the session's read of a
2025-11-25 Streamable HTTP call (sessions.load_for_call), or the count of the owner's running
calls (quotas.py). A call refused afterwards for another reason (its session's state, its scopes,
MAX_CALLS_*) gives its place back (``give_back``).

The rates of anything else (REQUEST_RATE_LIMIT per caller, request_rates.py; SESSION_OPEN_RATE per
address, quotas.admit_session) are token buckets (``TAKE_FUNCTION``): a rate N/period is a
bucket of N tokens that refills at N per period, so N may go at once, then one each period/N.
One number per caller holds it (the generic cell rate algorithm: when its bucket is full again),
so a busy caller costs Redis one small key whatever N is, and tokens are taken several at once.
"""
import functools
import math
import re
import secrets
import time
from dataclasses import dataclass, field
from typing import Optional

from . import metrics
from ..conf import get_config, per_config
from ..connections import async_redis, keys
from ..protocol.errors import LimitReached

CHARGE_FUNCTION = """
-- charge_rate(key, i): the call's place in a caller's window (KEYS entry ``key``; ARGV[i..i+3]:
-- calls, window (ms), now (ms), the call's member). -1 when it has one (an entry scored now),
-- else the ms until the oldest entry leaves the window (nothing is added).
local function charge_rate(key, i)
  local calls, window, now = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now - window)
  if redis.call('ZCARD', key) >= calls then
    local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
    return math.max(tonumber(oldest[2]) + window - now, 1)
  end
  redis.call('ZADD', key, now, ARGV[i + 3])
  redis.call('PEXPIRE', key, window)
  return -1
end
"""

TAKE_FUNCTION = """
-- take_tokens(key, i): up to ARGV[i + 3] tokens of a bucket (KEYS entry ``key``; ARGV[i..i+4]: the
-- microseconds one token takes to come back, a whole bucket's, now (us), how many are wanted,
-- how many taken earlier are given back unused). The key holds when the bucket is full again
-- (us); none: it is full. Returns how many were taken (1 or more), else -(ms until one is back).
local function take_tokens(key, i)
  local interval, span, now = tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2])
  local full = tonumber(redis.call('GET', key) or '0') - tonumber(ARGV[i + 4]) * interval
  full = math.max(full, now)
  local free = math.floor((now + span - full) / interval)
  if free < 1 then return -math.max(math.ceil((full + interval - span - now) / 1000), 1) end
  local taken = math.min(free, tonumber(ARGV[i + 3]))
  full = full + taken * interval
  redis.call('SET', key, string.format('%.0f', full), 'PX', math.ceil((full - now) / 1000))
  return taken
end
"""

_UNITS = {"s": 1, "sec": 1, "second": 1, "m": 60, "min": 60, "minute": 60, "h": 3600, "hour": 3600,
          "d": 86400, "day": 86400}
_RATE = re.compile(r"(\d+)/(\d*)(s|sec|seconds?|m|min|minutes?|h|hours?|d|days?)")
_PERIODS = {1: "second", 60: "minute", 3600: "hour", 86400: "day"}


@dataclass(frozen=True)
class Rate:
    """``calls`` per ``seconds``, as written (``text``)."""

    calls: int
    seconds: int
    text: str

    @property
    def period(self) -> str:
        """"minute", or "30 seconds" for a window of no unit's length."""
        return _PERIODS.get(self.seconds) or f"{self.seconds} seconds"


@functools.lru_cache(maxsize=256)
def parse(text) -> Rate:
    """``"20/m"``: 20 calls a minute. The period is s, m, h or d (or sec, min, hour, day, and their
    plurals), with an optional multiple: ``"10/30s"`` is 10 calls in any 30 seconds."""
    found = _RATE.fullmatch(text.replace(" ", "")) if isinstance(text, str) else None
    calls, multiple = (int(found[1]), int(found[2] or 1)) if found else (0, 0)
    if calls < 1 or multiple < 1:
        raise ValueError(f'A rate limit is "<calls>/<period>", such as "20/m" or "1000/h", not {text!r}.')
    unit = found[3] if found[3] in _UNITS else found[3][:-1]  # "minutes": "minute"
    return Rate(calls, multiple * _UNITS[unit], text.strip())


def retry_after(wait_ms: int, rate: Rate) -> int:
    """Whole seconds until a refused call may pass (Retry-After): rounded up, at least 1, at
    most the window (an entry another process's clock put ahead still leaves within it)."""
    return max(1, min(rate.seconds, math.ceil(wait_ms / 1000)))


def token_retry_after(wait_s: float, rate: Rate) -> int:
    """Whole seconds until a token of a ``rate`` bucket is back (Retry-After): rounded up, at
    least 1, at most the time one token takes to come back (a bucket another process's clock put
    a little ahead would otherwise say one second more)."""
    return max(1, min(math.ceil(rate.seconds / rate.calls), math.ceil(wait_s)))


def take_args(rate: Rate, wanted: int = 1, now_us: Optional[int] = None, given_back: int = 0) -> list:
    """``take_tokens``'s five ARGV entries: ``wanted`` tokens of a ``rate`` bucket at ``now_us``
    (microseconds; the clock by default), ``given_back`` taken earlier and not used. A token
    comes back every period/N, in whole microseconds: a million a second at most."""
    interval = max(1, round(rate.seconds * 1_000_000 / rate.calls))
    return [interval, interval * rate.calls, time.time_ns() // 1000 if now_us is None else now_us, wanted,
            given_back]


class _Setting:
    def __repr__(self):
        return "RATE_LIMIT"


#: A tool's ``rate_limit`` when it declares none: the ``RATE_LIMIT`` setting.
SETTING = _Setting()


def tool_rate(rate_limit) -> Optional[object]:
    """A tool's declared ``rate_limit``: SETTING, None (never limited) or a Rate; ValueError else."""
    return rate_limit if rate_limit is SETTING or rate_limit is None else parse(rate_limit)


@per_config
def configured() -> Optional[Rate]:
    """RATE_LIMIT as a Rate, or None."""
    text = get_config()["RATE_LIMIT"]
    return parse(text) if text else None


@dataclass
class Charge:
    """One call's place in its caller's window (``tool``: the tool's own window, "" for the
    caller's RATE_LIMIT one)."""

    key: str
    rate: Rate
    tool: str = ""
    member: str = field(default_factory=lambda: secrets.token_hex(8))
    #: None: not counted yet; -1: counted (the call has its place); >= 0: refused, the ms
    #: until a place frees.
    wait_ms: Optional[int] = None

    def args(self, now_ms: int) -> list:
        """``charge_rate``'s four ARGV entries."""
        return [self.rate.calls, self.rate.seconds * 1000, now_ms, self.member]

    def took(self, answer) -> None:
        """``charge_rate``'s answer."""
        self.wait_ms = int(answer)


def charge_for(caller: str, rate: Rate, tool: str = "") -> Charge:
    """A call's place, to be taken, in ``caller``'s window (quotas.caller_key)."""
    return Charge(keys().rate(caller, tool), rate, tool)


def uncounted(charge: Optional[Charge]) -> bool:
    """The call is rate limited and its place not taken yet (nor refused)."""
    return charge is not None and charge.wait_ms is None


def refused(charge: Optional[Charge]) -> bool:
    return charge is not None and charge.wait_ms is not None and charge.wait_ms >= 0


async def give_back(charge: Optional[Charge]) -> None:
    """The call took its place but was refused for another reason: the place is free again."""
    if charge is not None and charge.wait_ms == -1:
        charge.wait_ms = None
        await async_redis().zrem(charge.key, charge.member)


def refusal(charge: Charge) -> LimitReached:
    """The 429 of a refused call (counted as ``limit_refusals:rate``): one sentence naming the limit."""
    metrics.incr("limit_refusals:rate")
    rate, seconds = charge.rate, retry_after(charge.wait_ms, charge.rate)
    what = f"calls of {charge.tool}" if charge.tool else "tool calls"
    which = f"the tool's rate_limit {rate.text}" if charge.tool else f"RATE_LIMIT {rate.text}"
    return LimitReached(f"This client has made its {rate.calls} {what} per {rate.period} ({which}): "
                        f"retry in {seconds} s.", retry_after=seconds)
