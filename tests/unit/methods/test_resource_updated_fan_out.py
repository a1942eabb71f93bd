"""notifications/resources/updated costs whoever saved the row (toolsets/subscriptions.py waits
for it): its cost must not grow with what subscribers do. Many sessions of one user subscribed to
a row cost one readability check, their sessions one read, and a gone session is forgotten."""
import asyncio
import secrets

from mcp_transport.connections import async_redis, keys
from mcp_transport.methods import notify
from mcp_transport.state.sessions import SessionRecord


class Store:
    def __init__(self):
        self.appended = []

    async def append(self, session_id, stream_key, message, **options):
        self.appended.append((session_id, message["params"]["uri"]))


def test_subscribers_cost_one_check_per_user_and_one_session_read(monkeypatch):
    uri = f"test://fan-out/{secrets.token_hex(4)}"
    checks, store = [], Store()

    async def may_read(checked_uri, user_id):
        checks.append(user_id)
        return user_id != 2  # user 2 may no longer read the row

    monkeypatch.setattr(notify, "may_read", may_read)
    monkeypatch.setattr(notify, "get_event_store", lambda: store)

    async def scenario():
        client, names = async_redis(), keys()
        users = {f"fan-{secrets.token_hex(4)}-{n}": 1 if n < 150 else 2 for n in range(200)}
        for session_id, user_id in users.items():
            await client.set(names.session(session_id), SessionRecord(id=session_id, protocol_version="2025-11-25",
                                                                     user_id=user_id).to_json(), ex=60)
            await notify.subscribe(session_id, uri)
        gone = f"fan-{secrets.token_hex(4)}-gone"
        await notify.subscribe(gone, uri)  # its session expired since
        sent = await notify.resource_updated(uri)
        left = await client.smembers(names.uri_subscribers(uri))
        await client.delete(names.uri_subscribers(uri), *(names.session(s) for s in users))
        return users, gone, sent, left

    users, gone, sent, left = asyncio.run(scenario())
    assert sorted(checks) == [1, 2]  # once per user, not once per session
    assert sent == 150 and sorted(store.appended) == sorted((s, uri) for s, u in users.items() if u == 1)
    assert gone not in left and len(left) == 200
