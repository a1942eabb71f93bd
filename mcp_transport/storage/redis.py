"""Redis event store: one Redis stream per SSE stream, ``{prefix}:stream:{session}:{stream}``.

Each append is one round trip: XADD (trimmed to STREAM_MAXLEN), EXPIRE (STREAM_TTL) and a
PUBLISH on the stream's doorbell channel, pipelined. Positions are Redis entry ids, so
ordering and uniqueness inside a stream come from Redis, whichever process appends.
"""
import json

from ..conf import get_config
from ..connections import async_redis, keys
from ..protocol.ids import EventId
from .base import EventStore, StoredEvent, UnknownEvent


def _entry(fields):
    message = fields.get("m")
    return (json.loads(message) if message else None), fields.get("f") == "1"


class RedisEventStore(EventStore):
    async def append(self, session_id, stream_key, message, *, final=False):
        config, names = get_config(), keys()
        fields = {"m": json.dumps(message, ensure_ascii=False, separators=(",", ":")) if message else ""}
        if final:
            fields["f"] = "1"
        stream = names.stream(session_id, stream_key)
        async with async_redis().pipeline(transaction=False) as pipe:
            pipe.xadd(stream, fields, maxlen=config["STREAM_MAXLEN"], approximate=True)
            pipe.expire(stream, config["STREAM_TTL"])
            pipe.publish(names.stream_bell(session_id, stream_key), "1")
            position, *_ = await pipe.execute()
        return EventId(stream_key, position)

    async def read_after(self, session_id, stream_key, position):
        stream = keys().stream(session_id, stream_key)
        entries = await async_redis().xrange(stream, min=f"({position}", max="+")
        return [self._event(stream_key, entry_id, fields) for entry_id, fields in entries]

    async def replay_after(self, session_id, event_id):
        # Inclusive range: the first entry must be the id itself, or it is unknown or trimmed.
        stream = keys().stream(session_id, event_id.stream)
        entries = await async_redis().xrange(stream, min=event_id.position, max="+")
        if not entries or entries[0][0] != event_id.position:
            raise UnknownEvent(str(event_id))
        return [self._event(event_id.stream, entry_id, fields) for entry_id, fields in entries[1:]]

    async def delete_session(self, session_id):
        client = async_redis()
        streams = [key async for key in client.scan_iter(match=keys().stream(session_id, "*"), count=500)]
        if streams:
            await client.delete(*streams)

    @staticmethod
    def _event(stream_key, entry_id, fields):
        message, final = _entry(fields)
        return StoredEvent(EventId(stream_key, entry_id), message, final)
