"""The hand-off of a client's answer to a request of ours: the process that asked waits on the
answer's key and its doorbell (streams.py, worker/channel.py), whichever process received the
answer writes it there. A background job that gave its worker back to wait (a parked job) is
woken by the one process that takes its parked key.

Kept apart from streams.py so that the jobs package, which streams.py imports, can hand over
the answers that tasks/update and a call's retry bring without a cycle."""
import json
from typing import Optional

from ..conf import get_config
from ..connections import async_redis, keys, publish


async def hand_over(session_id: str, reply: dict) -> Optional[str]:
    """Store ``reply`` (a JSON-RPC response to our request ``reply["id"]``) for the process that
    waits for it and ring its doorbell. Returns the parked job that waits for it (the value
    jobs.resume_parked takes), taken once across processes, or None."""
    names = keys()
    reply_key = names.reply(session_id, reply["id"])
    async with async_redis().pipeline(transaction=False) as pipe:
        pipe.set(reply_key, json.dumps(reply), ex=get_config()["CLIENT_REQUEST_TIMEOUT"] + 60)
        publish(pipe, reply_key, "1")
        pipe.getdel(names.parked(session_id, reply["id"]))
        _, _, parked_job = await pipe.execute()
    return parked_job
