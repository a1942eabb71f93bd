"""Rows hold whatever a JSON-RPC message may carry (issue 10): NUL, lone surrogates and
non-finite floats, which PostgreSQL refuses as they are (mcp_transport/fields.py)."""
import pytest
from django.utils import timezone

from mcp_transport.fields import WRAPPED, safe_text, unwrap_json, wrap_json
from mcp_transport.models import McpJob, McpSession
from mcp_transport.protocol.ids import new_session_id, new_stream_key
from mcp_transport.storage.persist import all_rows

from .test_redis import lose_redis_copy

HOSTILE = {"nul": "a\x00b", "lone": "x\ud800", "low": "\udc00", "pair": "\U0001F600", "escaped": "\\u0000",
           WRAPPED: "looks like a wrapper", "list": ["\x00", 1, None]}


@pytest.mark.django_db(transaction=True)
def test_job_and_session_rows_keep_hostile_values():
    job = McpJob.objects.create(id="j" * 32, session_id="s" * 32, request_id="id\x00", stream_key="k", tool="t",
                                arguments=HOSTILE, progress_token="\x00", result={"v": float("nan"), **HOSTILE},
                                message="progress \x00", error="bad \ud800")
    job = McpJob.objects.get(pk=job.pk)
    assert (job.request_id, job.arguments, job.progress_token) == ("id\x00", HOSTILE, "\x00")
    assert job.result == {"v": None, **HOSTILE}
    assert (job.message, job.error) == ("progress \ufffd", "bad \ufffd")
    McpJob.objects.filter(pk=job.pk).update(result={"again": "\x00"})
    assert McpJob.objects.get(pk=job.pk).result == {"again": "\x00"}
    session = McpSession.objects.create(id=new_session_id(), protocol_version="2025-11-25", client_name="n\x00",
                                        client_info={"name": "n\x00"}, client_capabilities=HOSTILE,
                                        last_seen_at=timezone.now())
    session = McpSession.objects.get(pk=session.pk)
    assert (session.client_name, session.client_info, session.client_capabilities) == \
        ("n\ufffd", {"name": "n\x00"}, HOSTILE)


@pytest.mark.django_db(transaction=True)
async def test_events_keep_hostile_values_through_the_database(stores):
    session_id, stream_key = new_session_id(), new_stream_key()
    store = stores()
    message = {"jsonrpc": "2.0", "method": "notifications/message", "params": HOSTILE}
    first = await store.append(session_id, stream_key, None)
    await store.append(session_id, stream_key, message)
    await store.flush()
    assert await store.table.run(lambda: all_rows().filter(session_id=session_id).count()) == 2
    await lose_redis_copy(session_id)
    [event] = await store.replay_after(session_id, first)
    assert event.message == message


@pytest.mark.parametrize("text", ['{"a":1}', '"\\ud83d\\ude00"', '"\\\\"'])
def test_values_the_database_takes_are_not_wrapped(text):
    assert wrap_json(text) is text


@pytest.mark.parametrize("text", ['"\\u0000"', '"\\ud800"', '"\\udc00x"', '"\\ude00\\ud83d"', '{"mcp_transport.json":1}'])
def test_values_it_refuses_are_wrapped_and_come_back(text):
    import json

    wrapped = json.loads(wrap_json(text))
    assert set(wrapped) == {WRAPPED} and unwrap_json(wrapped) == json.loads(text)


def test_safe_text():
    assert safe_text("a\x00b\ud800") == "a\ufffdb\ufffd" and safe_text("plain") == "plain" and safe_text(None) is None
