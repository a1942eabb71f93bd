"""The one error mapping of the HTTP endpoints (transports.endpoint.answer_failures), which
Streamable HTTP and the 2024-11-05 HTTP+SSE endpoints both use."""
import logging

import pytest
import redis

from mcp_transport.protocol.errors import InvalidRequest, ProtocolError
from mcp_transport.transports.endpoint import answer_failures


async def fail(exc):
    raise exc


async def mapped(exc, caplog):
    errors = []

    async def send_error(error):
        errors.append(error)

    with caplog.at_level(logging.ERROR):
        await answer_failures(fail(exc), send_error, "test")
    (error,) = errors
    return error


async def test_a_protocol_error_is_answered_as_itself(caplog):
    refused = InvalidRequest("Bad request.")
    assert await mapped(refused, caplog) is refused
    assert not caplog.records


@pytest.mark.parametrize("exc, status, logged", [
    (redis.ConnectionError("down"), 503, "Redis is unreachable (for longer than REDIS_OUTAGE_TOLERANCE, 30 s)"),
    (redis.TimeoutError("slow"), 503, "Redis did not answer within REDIS_OUTAGE_TOLERANCE (30 s)"),
    # A Cluster named as one server (issue 18): a configuration problem, not an outage.
    (redis.exceptions.MovedError("3999 127.0.0.1:7001"), 503,
     "Redis answered MOVED: the Redis URL names one node of a Redis Cluster (name the Cluster: redis+cluster://HOST:PORT,...)"),
    (redis.ResponseError("CROSSSLOT Keys in request don't hash to the same slot"), 503,
     "Redis Cluster refused a command whose keys span several slots"),
    (redis.exceptions.ReadOnlyError("You can't write against a read only replica."), 503,
     "Redis is a read-only replica (a failover under way, or the Redis URL names a replica)"),
    (redis.ResponseError("OOM command not allowed"), 503, "Redis refused a command (ResponseError: OOM command not allowed)"),
    (KeyError("bug"), 500, "the test endpoint failed")])
# (the database's outage: test_an_unreachable_database_is_a_503_not_an_internal_error)
async def test_anything_else_is_a_logged_5xx_with_a_clear_message(exc, status, logged, caplog):
    error = await mapped(exc, caplog)
    assert isinstance(error, ProtocolError) and error.http_status == status
    assert error.message in ("The session store is unavailable.", "Internal error.")
    assert [record.getMessage() for record in caplog.records] == [logged]


async def test_work_that_succeeds_sends_no_error(caplog):
    errors = []

    async def ok():
        return None

    async def send_error(error):
        errors.append(error)

    await answer_failures(ok(), send_error, "test")
    assert errors == []


async def test_an_unreachable_database_is_a_503_not_an_internal_error(caplog):
    """bench/chaos.py's database cut: every initialize answered 500 "Internal error."."""
    from django.db import OperationalError

    error = await mapped(OperationalError("connection failed: server closed the connection unexpectedly"), caplog)
    assert isinstance(error, ProtocolError) and error.http_status == 503
    assert error.message == "The database is unreachable; try again shortly."
    assert [record.getMessage()[:30] for record in caplog.records] == ["the database is unreachable: c"]
