"""Helpers of the event-store tests."""


def notification(i):
    return {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": i, "message": f"é {i}"}}


async def append_many(store, session_id, stream_key, count, start=0):
    return [await store.append(session_id, stream_key, notification(start + i)) for i in range(count)]


async def orm(store, function, *args):
    """Run an ORM function on the store's own database thread (one writer at a time: SQLite)."""
    return await store.table.run(function, *args)
