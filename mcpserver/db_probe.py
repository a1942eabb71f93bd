"""A test's view of this process's database work (tests/integration/test_session_costs.py).

With ``MCP_DB_PROBE`` set to a directory, every query of the process is appended to
``<dir>/queries.log`` as ``<thread name> <statement>``, and held while ``<dir>/hold`` exists: a
test holds the database to prove that a request never waits for it (the writers that work
behind the requests, on threads of their own, are the ones that wait), then releases it and
watches the rows arrive. Only an example project's setting: the app itself knows nothing of it.
"""
import os
import threading
import time
from pathlib import Path

from django.db.backends.signals import connection_created

#: Seconds between looks at the hold file while it is there.
HOLD_POLL = 0.01


def install(directory: str) -> None:
    folder = Path(directory)
    log, hold = folder / "queries.log", folder / "hold"
    lock = threading.Lock()

    def probe(execute, sql, params, many, context):
        with lock, log.open("a") as out:
            out.write(f"{threading.current_thread().name} {' '.join(str(sql).split())[:200]}\n")
        while hold.exists():
            time.sleep(HOLD_POLL)
        return execute(sql, params, many, context)

    def wrap(sender, connection, **kwargs):
        if probe not in connection.execute_wrappers:
            connection.execute_wrappers.append(probe)

    connection_created.connect(wrap, weak=False)


if os.environ.get("MCP_DB_PROBE"):
    install(os.environ["MCP_DB_PROBE"])
