"""The database time of the project's sync code: each statement it runs for a call is bounded
(``STATEMENT_TIMEOUT_SECONDS``, or the tool's own ``statement_timeout``), and a running statement
is cancelled when its call is (the client closed a 2026-07-28 response, sent
``notifications/cancelled``, or deleted its session).

Why: one caller's search that makes the database work for seconds holds a connection and the
database's CPU, whatever share of the web process's threads it has, and a query keeps running
after its client went away unless someone cancels it. So every statement a call runs goes
through ``QueryGuard`` (Django's ``execute_wrapper``, in the thread that runs the call):

- PostgreSQL: ``SET statement_timeout`` on the connection when the call's bound differs from the
  one the connection has (connections live across calls, so most calls pay nothing), and
  ``cancel()`` on the connection from the event loop (libpq's cancel request, safe from another
  thread);
- SQLite: a progress handler that interrupts a statement past its deadline or once the call is
  cancelled (``interrupt()`` from the event loop too);
- other databases: not bounded here (use the server's own setting).

A statement stopped so raises ``StatementTimeout`` (the tool's answer says so, in one sentence,
with no traceback in the logs) or ``ToolCancelled`` (the call was cancelled: nobody waits for an
answer).
"""
import contextlib
import threading
import time

from django.db import DatabaseError, connections

from .context import ToolCancelled

class _Default:
    def __repr__(self):
        return "STATEMENT_TIMEOUT_SECONDS"


#: A tool's ``statement_timeout`` when it sets none: the STATEMENT_TIMEOUT_SECONDS setting.
DEFAULT_STATEMENT_TIMEOUT = _Default()

#: How often (SQLite virtual machine instructions) the progress handler looks at the clock.
SQLITE_CHECK_EVERY = 10_000


class StatementTimeout(Exception):
    """A statement of the call ran past its bound and the database stopped it."""

    def __init__(self, seconds: float):
        super().__init__(f"A database query ran longer than this server's limit of {seconds:g} s and was stopped.")
        self.seconds = seconds


class QueryGuard:
    """Bounds and cancels the statements of one call's sync code (``wrap`` it in the thread)."""

    def __init__(self, seconds):
        #: The bound of each statement, in seconds (None: none).
        self.seconds = seconds
        self.cancelled = False
        self._lock = threading.Lock()
        #: The raw connections running a statement of this call now (to cancel them).
        self._running = set()
        #: The raw connections this call set its bound on (inside a transaction, which may roll
        #: the SET back: it is not trusted beyond the call).
        self._bounded = set()

    def wrap(self, func):
        """``func`` with every statement it runs through this guard."""
        def guarded(*args, **kwargs):
            with contextlib.ExitStack() as stack:
                for wrapper in connections.all():
                    stack.enter_context(wrapper.execute_wrapper(self._execute))
                return func(*args, **kwargs)
        return guarded

    def cancel(self) -> None:
        """Stop the call's running statement (from any thread); its next one does not start."""
        self.cancelled = True
        with self._lock:
            running = list(self._running)
        for raw in running:
            _interrupt(raw)

    def _execute(self, execute, sql, params, many, context):
        if self.cancelled:
            raise ToolCancelled("The call was cancelled; its queries are stopped.")
        wrapper = context["connection"]
        raw = wrapper.connection
        stop = self._bound(wrapper, raw)
        with self._lock:
            self._running.add(raw)
        try:
            return execute(sql, params, many, context)
        except DatabaseError as exc:
            if self.cancelled:
                raise ToolCancelled("The call was cancelled; its query was stopped.") from None
            if stop is not None and stop(exc):
                raise StatementTimeout(self.seconds) from None
            raise
        finally:
            with self._lock:
                self._running.discard(raw)
            if wrapper.vendor == "sqlite":
                raw.set_progress_handler(None, 0)

    def _bound(self, wrapper, raw):
        """Set the statement's bound on its connection; returns ``stop(error)``, true when the
        statement's failure is the bound's doing (None: nothing bounds it here)."""
        seconds = self.seconds
        if wrapper.vendor == "postgresql":
            if raw not in self._bounded:
                _set_postgresql_timeout(wrapper, raw, seconds)
                self._bounded.add(raw)
            return _postgresql_timed_out if seconds else None
        if wrapper.vendor != "sqlite":
            return None
        deadline = time.monotonic() + seconds if seconds else None
        raw.set_progress_handler(lambda: self.cancelled or (deadline is not None and time.monotonic() > deadline),
                                 SQLITE_CHECK_EVERY)
        return (lambda _error: time.monotonic() > deadline) if deadline is not None else None


#: SQLSTATE query_canceled: a statement_timeout ran out (or a cancel, told apart by the guard).
QUERY_CANCELED = "57014"


def _set_postgresql_timeout(wrapper, raw, seconds) -> None:
    """``SET statement_timeout`` (0: none) unless the connection has that value already. A value
    set inside a transaction is not remembered: a rollback undoes it."""
    milliseconds = int(seconds * 1000) if seconds else 0
    if getattr(raw, "_mcp_statement_timeout_ms", 0) == milliseconds:
        return
    with raw.cursor() as cursor:  # the raw cursor: not through the wrappers again
        cursor.execute(f"SET statement_timeout = {milliseconds:d}")
    raw._mcp_statement_timeout_ms = None if wrapper.in_atomic_block else milliseconds


def _postgresql_timed_out(error) -> bool:
    cause = error.__cause__  # the driver's error, which Django's wraps
    return (getattr(cause, "sqlstate", None) or getattr(cause, "pgcode", None)) == QUERY_CANCELED


def _interrupt(raw) -> None:
    try:
        if hasattr(raw, "interrupt"):  # sqlite3
            raw.interrupt()
        elif hasattr(raw, "cancel"):  # psycopg 3 and 2
            raw.cancel()
    except Exception:  # the connection closed meanwhile: nothing runs on it any more
        pass
