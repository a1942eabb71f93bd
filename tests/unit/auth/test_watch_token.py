"""auth.watch_token: a stream ends with its token, even when the revocation was heard between the
request's token check and the moment its stream began to watch (a few ms of round trips)."""
import asyncio
import time

from mcp_transport import auth


def principal(digest, checked_at):
    return auth.Principal(key="user:1", digest=digest, checked_at=checked_at)


async def settle():
    for _ in range(3):
        await asyncio.sleep(0)


async def test_a_revocation_heard_while_the_stream_opened_ends_it():
    checked = principal("d-opening", time.time())
    auth.end_streams("d-opening")  # heard after the check, before the stream watched
    ended = []
    stop = auth.watch_token(checked, lambda: ended.append(True))
    await settle()
    stop()
    assert ended == [True]


async def test_a_revocation_heard_before_the_check_does_not_end_a_later_stream():
    auth.end_streams("d-reissued")
    later = principal("d-reissued", time.time() + 1)  # checked (and accepted) after the revocation was heard
    ended = []
    stop = auth.watch_token(later, lambda: ended.append(True))
    await settle()
    stop()
    assert ended == []


async def test_a_revocation_after_watching_ends_the_stream_at_once():
    ended = []
    stop = auth.watch_token(principal("d-open", time.time()), lambda: ended.append(True))
    auth.end_streams("d-open")
    stop()
    assert ended == [True]


def test_heard_revocations_are_bounded(monkeypatch):
    monkeypatch.setattr(auth, "FORGOTTEN_MAX", 3)
    for i in range(10):
        auth.end_streams(f"d-many-{i}")
    assert len(auth._forgotten) <= 3 and "d-many-9" in auth._forgotten
