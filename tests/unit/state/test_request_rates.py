"""REQUEST_RATE_LIMIT (state/request_rates.py) and the token bucket it shares with SESSION_OPEN_RATE
(rates.TAKE_FUNCTION): the bucket's arithmetic on the run's real Redis with the clock the test
gives, then what a process takes from it and hands out from memory."""
import asyncio
import secrets

import pytest
from django.conf import settings
from django.test import override_settings

from mcp_transport.auth import Principal
from mcp_transport.methods.dispatch import Call
from mcp_transport.state import quotas, rates, request_rates
from mcp_transport.state.sessions import SessionRecord

S = 1_000_000  # microseconds


def takes(rate: str, asks: list) -> list:
    """``take_tokens``'s answer for each (microseconds after the start, tokens wanted[, given
    back]), in one bucket."""
    async def run():
        key = f"{settings.MCP_TRANSPORT['KEY_PREFIX']}:test-bucket:{secrets.token_hex(6)}"
        start = 1_800_000_000 * S
        return [await quotas.script(request_rates.TAKE_LUA)(
            keys=[key], args=rates.take_args(rates.parse(rate), ask[1], start + ask[0], *ask[2:])) for ask in asks]
    return asyncio.run(run())


def test_a_full_bucket_gives_n_at_once_then_one_each_period_over_n():
    # 4 per 8 s: a token every 2 s. 4 of 10 wanted; at 0.5 s the next is 1.5 s away; at 2 s one
    # is back, and the next 2 s after; long after, the bucket is full again (4, not more).
    assert takes("4/8s", [(0, 10), (S // 2, 1), (2 * S, 5), (2 * S, 1), (100 * S, 10)]) == [4, -1500, 1, -2000, 4]


def test_a_take_gets_what_is_left_and_a_refusal_takes_nothing():
    assert takes("3/h", [(0, 2), (0, 2), (0, 1), (1, 1)]) == [2, 1, -1_200_000, -1_200_000]


def test_tokens_given_back_unused_can_be_taken_again():
    # 4 per 8 s: all 4 taken; 3 given back, 2 of them taken again, then the third; then none.
    assert takes("4/8s", [(0, 4), (1, 1), (2, 2, 3), (3, 2), (4, 1)]) == [4, -2000, 2, 1, -2000]


def test_retry_after_is_at_most_the_time_one_token_takes_to_come_back():
    six_an_hour, many_a_minute = rates.parse("6/h"), rates.parse("1200/m")
    # A bucket another process's clock put a little ahead says a token is 600.0005 s away.
    assert rates.token_retry_after(600.0005, six_an_hour) == 600
    assert rates.token_retry_after(599.2, six_an_hour) == 600
    assert rates.token_retry_after(0.2, six_an_hour) == 1
    assert rates.token_retry_after(0.049, many_a_minute) == 1


def test_a_wait_under_a_millisecond_is_one_not_zero():
    assert takes("1000/s", [(0, 1000), (999, 1)]) == [1000, -1]


# -- what a process takes, and hands out from memory ------------------------------------------

def limited(rate, **extra):
    return override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "REQUEST_RATE_LIMIT": rate, **extra})


def new_caller():
    return quotas.caller_key("", f"198.51.100.{secrets.randbelow(250)}-{secrets.token_hex(4)}")


@pytest.fixture
def round_trips(monkeypatch):
    """The takes from Redis ``request_rates.admit`` makes (each one round trip), as wanted."""
    made, take = [], request_rates._take

    async def counting(caller, rate, lease, now):
        made.append(caller)
        return await take(caller, rate, lease, now)
    monkeypatch.setattr(request_rates, "_take", counting)
    return made


def admitted(caller, count) -> list:
    """``count`` requests of ``caller`` in turn: None for each admitted, else its LimitReached."""
    async def run():
        answers = []
        for _ in range(count):
            try:
                answers.append(await request_rates.admit(caller))
            except quotas.LimitReached as exc:
                answers.append(exc)
        return answers
    return asyncio.run(run())


def test_a_slow_callers_requests_are_counted_one_by_one_and_the_refusal_names_the_limit(round_trips):
    with limited("5/h", CALLER_COUNT_MEMORY_SECONDS=60):
        answers = admitted(new_caller(), 8)
    assert answers[:5] == [None] * 5
    refusal = answers[5]
    assert refusal.http_status == 429 and refusal.code == -32600
    assert refusal.message.startswith(
        "This client has made its 5 requests per hour (REQUEST_RATE_LIMIT 5/h): retry in ")
    assert 710 <= int(dict(refusal.headers)["retry-after"]) <= 720  # a token every 12 minutes
    assert [answer.message for answer in answers[6:]] == [refusal.message] * 2
    # A bucket of 5 gives a process one token at a time; the refusal is remembered until then.
    assert len(round_trips) == 6


def test_a_busy_caller_takes_twice_as_many_each_time_up_to_a_twentieth_of_its_bucket(round_trips):
    with limited("2000/h", CALLER_COUNT_MEMORY_SECONDS=60):
        assert admitted(new_caller(), 400) == [None] * 400
    # 1 + 2 + 4 + 8 + 16 + 32 + 64 + 100 + 100 + 100 >= 400: ten round trips, not 400.
    assert len(round_trips) == 10


def test_tokens_a_process_did_not_hand_out_while_fresh_go_back_with_its_next_take(round_trips):
    caller = new_caller()
    with limited("40/h", CALLER_COUNT_MEMORY_SECONDS=60):
        assert admitted(caller, 2) == [None, None]  # a token, then two (one left: a twentieth of 40)
        lease = request_rates._leases[caller]
        assert (lease.left, lease.taken) == (1, 2)
        lease.fresh_until = 0  # gone stale (60 s here)
        answers = admitted(caller, 40)
    assert answers[:38] == [None] * 38 and all(isinstance(answer, quotas.LimitReached) for answer in answers[38:])


def test_without_memory_each_request_takes_its_own_token(round_trips):
    with limited("2000/h", CALLER_COUNT_MEMORY_SECONDS=0):
        assert admitted(new_caller(), 20) == [None] * 20
    assert len(round_trips) == 20


def test_the_processes_together_never_pass_more_than_the_rate(monkeypatch):
    """Two processes (two memories of leases) serving one caller in turn: whatever each took and
    did not hand out is spent from the one bucket, so together they pass at most N."""
    memories = [request_rates._leases, type(request_rates._leases)()]
    caller, passed = new_caller(), 0
    with limited("200/h", CALLER_COUNT_MEMORY_SECONDS=60):
        for turn in range(400):
            monkeypatch.setattr(request_rates, "_leases", memories[turn // 7 % 2])
            passed += admitted(caller, 1) == [None]
    assert 190 <= passed <= 200


def test_a_caller_with_neither_principal_nor_address_and_a_server_without_the_setting_pass(round_trips):
    with limited("1/h"):
        assert admitted("", 3) == [None] * 3
    with limited(None):
        assert admitted(new_caller(), 3) == [None] * 3
    assert round_trips == []


def test_the_caller_is_the_principal_else_the_address_in_both_eras():
    session = SessionRecord(id="s" * 32, protocol_version="2025-11-25")
    sessionless = SessionRecord(id="", protocol_version="2026-07-28")

    def caller(session, key, address):
        return Call(session=session, principal=Principal(key=key), address=address).caller.key  # made with it
    assert caller(session, "user:7", "192.0.2.1") == caller(sessionless, "user:7", "192.0.2.9") \
        == quotas.caller_key("user:7", "")
    assert caller(session, "", "192.0.2.1") == caller(sessionless, "", "192.0.2.1") \
        == quotas.caller_key("", "192.0.2.1")
    assert caller(session, "", "") == ""  # stdio started without --user


def test_the_settings_are_checked():
    from mcp_transport.checks import values_check

    with limited("20 a minute", SESSION_OPEN_RATE="3/fortnight"):
        errors = [error.msg for error in values_check(None)]
    assert any("REQUEST_RATE_LIMIT" in error for error in errors)
    assert any("SESSION_OPEN_RATE" in error for error in errors)
    with limited("20/m", SESSION_OPEN_RATE=None):
        assert not [error for error in values_check(None) if "RATE" in error.msg]
