"""Rate limits (state/rates.py): the text of a rate, the window's arithmetic on the real Redis of
the run with an explicit clock (the boundary is where the test puts it, not where the machine's
time falls), and the admission that takes a call's place in the same script as its count
(quotas.py), inline and background, with a tool's own window apart from RATE_LIMIT's."""
import asyncio
import secrets

import pytest
from django.conf import settings
from django.test import override_settings

from mcp_transport.admin import dashboard
from mcp_transport.checks import values_check
from mcp_transport.methods.registry import make_tool
from mcp_transport.protocol.jsonrpc import Request
from mcp_transport.auth.callers import Caller
from mcp_transport.methods import dispatch
from mcp_transport.running.routes import Route
from mcp_transport.state import quotas, rates
from mcp_transport.auth import Principal


@pytest.mark.parametrize("text, calls, seconds, period", [
    ("20/m", 20, 60, "minute"), ("1000/h", 1000, 3600, "hour"), ("5/minute", 5, 60, "minute"),
    ("3 / hour", 3, 3600, "hour"), ("2/days", 2, 86400, "day"), ("1/s", 1, 1, "second"),
    ("10/30s", 10, 30, "30 seconds"), ("7/2h", 7, 7200, "7200 seconds"), ("4/sec", 4, 1, "second")])
def test_a_rate_is_calls_per_period(text, calls, seconds, period):
    rate = rates.parse(text)
    assert (rate.calls, rate.seconds, rate.period, rate.text) == (calls, seconds, period, text.strip())


@pytest.mark.parametrize("text", ["0/m", "20", "20/ms", "m/20", "-1/m", "10/0s", "20/week", "", 20, None, "20/m/h"])
def test_anything_else_is_refused_with_one_sentence(text):
    with pytest.raises(ValueError, match=r'^A rate limit is "<calls>/<period>", such as "20/m"'):
        rates.parse(text)


@pytest.mark.parametrize("wait_ms, seconds, expected", [
    (1, 60, 1), (999, 60, 1), (1000, 60, 1), (1001, 60, 2), (59_001, 60, 60), (60_000, 60, 60),
    (3_600_000, 60, 60),  # an entry another process's clock put ahead: still at most the window
    (0, 3600, 1)])
def test_retry_after_is_whole_seconds_from_1_to_the_window(wait_ms, seconds, expected):
    assert rates.retry_after(wait_ms, rates.Rate(1, seconds, "x")) == expected


# -- the window, on Redis, with the clock the test gives --------------------------------------

CHARGE_LUA = rates.CHARGE_FUNCTION + "return charge_rate(KEYS[1], 1)"


def charges(rate: str, times_ms: list) -> list:
    """``charge_rate``'s answer for one call at each of ``times_ms``, in one fresh window."""
    async def run():
        charge = rates.charge_for(f"caller:test-{secrets.token_hex(6)}", rates.parse(rate))
        answers = []
        for now in times_ms:
            answers.append(await quotas.script(CHARGE_LUA)(keys=[charge.key], args=charge.args(now)[:3] +
                                                           [secrets.token_hex(4)]))
        return answers
    return asyncio.run(run())


def test_exactly_n_calls_pass_in_any_window_and_the_refused_learn_when_the_oldest_leaves():
    base = 1_800_000_000_000
    # 3 per 10 s: calls at 0, 1, 2 s pass; at 5 s the oldest (0 s) leaves in 5 s; refusals add nothing.
    answers = charges("3/10s", [base, base + 1000, base + 2000, base + 5000, base + 9_999])
    assert answers == [-1, -1, -1, 5000, 1]
    # The window slides: at 10 s the call of 0 s has left it (one place), at 10.5 s nobody else has.
    answers = charges("3/10s", [base, base + 1000, base + 2000, base + 10_000, base + 10_500, base + 11_000])
    assert answers == [-1, -1, -1, -1, 500, -1]


def test_a_refusal_right_at_the_boundary_waits_one_ms_not_zero():
    base = 1_800_000_000_000
    assert charges("1/1s", [base, base + 999, base + 1000]) == [-1, 1, -1]


# -- admission: the place is taken by the script that counts the caller's calls ---------------

def limited(**extra):
    return override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "MAX_CALLS_PER_CALLER": 64, **extra})


def new_caller():
    return quotas.caller_key("", f"198.51.100.{secrets.randbelow(250)}-{secrets.token_hex(4)}")


def test_a_callers_calls_pass_n_times_inline_and_background_then_429_naming_the_limit(monkeypatch):
    reads = []
    read = quotas.running_calls

    async def counting(key, *rate):
        reads.append(key)
        return await read(key, *rate)
    monkeypatch.setattr(quotas, "running_calls", counting)

    async def calls():
        caller, rate = new_caller(), rates.parse("3/h")
        slots = [await quotas.admit_caller(caller, background, rates.charge_for(caller, rate))
                 for background in (False, True, False)]
        with pytest.raises(quotas.LimitReached) as refused:
            await quotas.admit_caller(caller, False, rates.charge_for(caller, rate))
        with pytest.raises(quotas.LimitReached):
            await quotas.admit_caller(caller, True, rates.charge_for(caller, rate))
        for slot in slots:
            await quotas.release_call(slot)
        return refused.value
    with limited():
        refusal = asyncio.run(calls())
    assert refusal.http_status == 429 and refusal.code == -32600
    assert refusal.message.startswith("This client has made its 3 tool calls per hour (RATE_LIMIT 3/h): retry in ")
    retry_after = int(dict(refusal.headers)["retry-after"])
    assert 3590 <= retry_after <= 3600
    assert len(reads) == 3  # one read per inline call, taking its place with it; a job's admission takes its own


def test_a_call_refused_for_its_concurrency_keeps_no_place_in_the_window():
    async def calls():
        caller, rate = new_caller(), rates.parse("2/h")
        first = await quotas.admit_caller(caller, True, rates.charge_for(caller, rate))
        refused = rates.charge_for(caller, rate)
        with pytest.raises(quotas.LimitReached, match="requests at once"):
            await quotas.admit_caller(caller, False, refused)
        await rates.give_back(refused)  # as the pipeline's refusal does
        await quotas.release_call(first)
        second = await quotas.admit_caller(caller, False, rates.charge_for(caller, rate))
        await quotas.release_call(second)
        with pytest.raises(quotas.LimitReached, match="RATE_LIMIT 2/h"):
            await quotas.admit_caller(caller, False, rates.charge_for(caller, rate))
    with limited(MAX_CALLS_PER_CALLER=1, CALLER_COUNT_MEMORY_SECONDS=0):
        asyncio.run(calls())


def test_a_session_read_takes_the_place_and_admission_then_needs_no_round_trip(monkeypatch):
    from mcp_transport.state import sessions

    async def calls():
        session = sessions.SessionRecord(id=secrets.token_hex(16), protocol_version="2025-11-25")
        await sessions.create(session)
        caller, rate = new_caller(), rates.parse("1/h")
        answers = []
        for _ in range(2):
            charge = rates.charge_for(caller, rate)
            record, running = await sessions.load_for_call(session.id, charge)
            assert record.id == session.id and running == 0
            answers.append(charge.wait_ms)
            try:
                await quotas.release_call(await quotas.admit_call(session.id, running, rate=charge))
            except quotas.LimitReached as exc:
                answers.append(exc.message)
        return answers

    async def no_read(*args):
        raise AssertionError("admission read Redis again")
    monkeypatch.setattr(quotas, "running_calls", no_read)
    with limited():
        answers = asyncio.run(calls())
    assert answers[0] == -1 and 3_590_000 < answers[1] <= 3_600_000
    assert answers[2].startswith("This client has made its 1 tool calls per hour")


# -- which calls are limited, and by which window ---------------------------------------------

def call(name="echo"):
    return Request(id=1, method="tools/call", params={"name": name, "arguments": {}})


def rate_charge(request, principal, address):
    """The rate charge of ``request``'s route for the caller of ``principal`` and ``address``."""
    return Route.of(request, dispatch.METHODS).rate_charge(Caller.of(principal, address))


def test_the_caller_is_the_principal_else_the_address_and_a_tool_of_its_own_counts_apart():
    with limited(RATE_LIMIT="20/m"):
        by_user = rate_charge(call(), Principal(key="user:7"), "192.0.2.1")
        same_user = rate_charge(call(), Principal(key="user:7"), "192.0.2.99")  # another token, address
        unasked = rate_charge(call(), Principal(key="user:7"), lambda: pytest.fail("address asked"))
        by_address = rate_charge(call(), Principal(), lambda: "192.0.2.1")
        rationed = rate_charge(call("rationed_echo"), Principal(key="user:7"), "")
        nobody = rate_charge(call(), Principal(), "")  # stdio without --user
        listing = rate_charge(Request(id=2, method="tools/list", params={}), Principal(key="user:7"), "")
    assert by_user.key == same_user.key == unasked.key != by_address.key
    assert by_address.key == rates.charge_for(quotas.caller_key("", "192.0.2.1"), by_address.rate).key
    assert by_user.rate == rates.parse("20/m") and not by_user.tool
    assert rationed.rate == rates.parse("3/h") and rationed.tool == "rationed_echo" and rationed.key != by_user.key
    assert nobody is None and listing is None
    with limited():  # no RATE_LIMIT: only a tool's own
        assert rate_charge(call(), Principal(key="user:7"), "") is None
        assert rate_charge(call("rationed_echo"), Principal(key="user:7"), "") is not None


def test_a_tool_declares_its_own_rate_or_none_and_a_bad_one_fails_at_import():
    async def tool(text: str) -> str:
        return text
    assert make_tool(tool).rate_limit is rates.SETTING
    assert make_tool(tool, rate_limit="5/m").rate_limit == rates.parse("5/m")
    assert make_tool(tool, rate_limit=None).rate_limit is None
    with pytest.raises(ValueError, match="A rate limit is"):
        make_tool(tool, rate_limit="5 per minute")


def test_the_setting_is_checked():
    with limited(RATE_LIMIT="20/fortnight"):
        errors = values_check(None)
    assert [error.msg for error in errors if "RATE_LIMIT" in error.msg]
    with limited(RATE_LIMIT="20/m"):
        assert not [error for error in values_check(None) if "RATE_LIMIT" in error.msg]


def test_the_dashboard_card_shows_the_limit_the_tools_of_their_own_and_the_refusals():
    card = dashboard.rate_card({"limit_refusals:rate": 1234}, "20/m",
                               {"rationed_echo": rates.parse("3/h"), "health": None})
    assert (card.value, card.detail) == ("20/m", "1,234 calls refused; own limits: health unlimited, rationed_echo 3/h")
    assert dashboard.rate_card({}, None, {}).value == "none"
    assert dashboard.tool_rates()["rationed_echo"] == rates.parse("3/h")
