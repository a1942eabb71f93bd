"""Threads for the sync code a web process runs: one bounded pool per purpose, a fair share of
each pool per session, and no thread held while a sync tool waits for its client.

Theory of operation. Sync code runs in threads: sync tools, sync resources, prompts and
completions, and the blocking publish of a Celery job. Were they to share one pool (as asyncio's
default executor), six sync tools waiting for absent clients' answers would stall every session's
``resources/read`` until ``CLIENT_REQUEST_TIMEOUT``. So:

- each purpose has its own **lane** (``TOOLS``, ``HANDLERS``, ``BROKER``) with its own threads:
  a lane that fills up never delays another;
- in a lane, one session (a sessionless call: its caller) runs at most
  ``SYNC_THREADS_PER_SESSION`` calls at once, and one caller (its principal, else its client
  address) at most ``SYNC_THREADS_PER_CALLER`` across all its sessions, and a caller that runs
  something already never takes the lane's last free thread (``ROOM_FOR_ANOTHER``): two
  callers flooding a lane leave a thread for a third. Further calls wait their turn: a freed
  thread goes to the waiting caller that runs the fewest, callers taking turns among equals,
  and to that caller's oldest call whose session is under its share (one session, one account
  with many sessions, or a few callers, cannot take every thread; one that queued many calls
  first is not served before everyone who came after it);
- a sync tool that waits for its client (``ctx.elicit()``, ``sample()``, ``list_roots()``) gives
  its tool thread back for the wait and takes one again when the answer is there. Its OS thread
  stays blocked, so those waits have their own bound: ``SYNC_WAITING_THREADS`` per process,
  ``SYNC_WAITING_PER_SESSION`` per session and ``SYNC_WAITING_PER_CALLER`` per caller (its
  principal, else its client address: one client with many sessions cannot take every place);
  past it the ask fails at once with ``ClientRequestError``, which the tool gets like any
  unanswered request. A client that went away stops holding its places: a cancel or the
  session's DELETE ends the wait at once, and a wait whose stream nobody reads any more (the
  client disconnected and did not resume) ends after ``CLIENT_GONE_SECONDS``
  (streams.RequestStream.request).

A slot is given back when the thread ends, not when the awaiting task does: a request cancelled
while its sync code runs (a DELETE) keeps the slot until that code returns, so a lane never runs
more threads than it has.
"""
import asyncio
import collections
import contextvars
import functools
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

from asgiref.sync import SyncToAsync

from ..conf import get_config

TOOLS, HANDLERS, BROKER = "tools", "handlers", "broker"

#: Threads of the broker lane: publishing a job takes a few milliseconds.
BROKER_THREADS = 2
#: Free threads of a lane that only a caller running nothing in it may take: two callers
#: flooding it leave one for a third (issue 38: a third user's 2 ms call waited 8 s).
ROOM_FOR_ANOTHER = 1

#: The Hold of the sync call this context runs (read by Context.send_request in its thread).
_current = contextvars.ContextVar("mcp_thread_hold", default=None)


class TooManyWaiting(Exception):
    """No room for another sync tool waiting on its client."""


class Lane:
    """A pool of ``threads`` threads, shared fairly by sessions (``per_session`` each at most),
    by callers (``per_caller`` each at most, whatever their sessions; None: no such share), and
    among callers: one that runs something already never takes the last free thread (one
    more caller always finds one), and a freed thread goes to the waiting caller that runs the
    fewest, in turn among equals (not to whoever queued first: a caller that flooded the lane
    would be served before everyone who came after it).

    A caller is its principal, else its client address (``run``'s ``caller``); a call that has
    neither is its owner's (its session)."""

    def __init__(self, name: str, threads: int, per_session: int, spare_threads: int = 0, per_caller=None):
        self.name, self.threads, self.per_session, self.per_caller = name, threads, per_session, per_caller
        # Spare OS threads for callers parked while they wait for a client (their slot is free).
        self.executor = _executor(name, threads + spare_threads)
        self.running = 0
        self.by_owner = collections.Counter()
        self.by_caller = collections.Counter()
        #: Running calls by whose turn it is (``_share_of``): the caller, else the owner.
        self.by_share = collections.Counter()
        #: Waiting calls, a line per share, the lines in turn order (the last served at the end).
        self._lines = collections.OrderedDict()

    def _may_run(self, owner, caller=None) -> bool:
        free = self.threads - self.running
        if free <= 0 or self.by_owner[owner] >= self.per_session:
            return False
        if caller is not None and self.per_caller is not None and self.by_caller[caller] >= self.per_caller:
            return False
        # Room for one more caller: the last free thread is for a caller that runs nothing here.
        return free > ROOM_FOR_ANOTHER or not self.by_share[_share_of(owner, caller)]

    async def acquire(self, owner, caller=None) -> None:
        """Take a slot for ``owner`` (and ``caller``), waiting in line while the lane or a share is full."""
        if self._may_run(owner, caller):  # nobody waiting could take it: _grant hands out what it can
            self._take(owner, caller)
            return
        turn = asyncio.get_running_loop().create_future()
        self._lines.setdefault(_share_of(owner, caller), collections.deque()).append((owner, caller, turn))
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.release(owner, caller)  # granted just as the caller was cancelled
            raise

    def _take(self, owner, caller=None):
        self.running += 1
        self.by_owner[owner] += 1
        self.by_share[_share_of(owner, caller)] += 1
        if caller is not None:
            self.by_caller[caller] += 1

    def release(self, owner, caller=None) -> None:
        self.running -= 1
        _decrement(self.by_owner, owner)
        _decrement(self.by_share, _share_of(owner, caller))
        if caller is not None:
            _decrement(self.by_caller, caller)
        self._grant()

    def _grant(self):
        """Hand free threads to waiting calls: each time to the waiting share that runs the
        fewest (the first in turn among equals), its oldest call that may run."""
        while self.running < self.threads:
            chosen = None
            for share in list(self._lines):
                entry = self._first_runnable(share)
                if entry is not None and (chosen is None or self.by_share[share] < self.by_share[chosen[0]]):
                    chosen = share, entry
            if chosen is None:
                return
            share, (owner, caller, turn) = chosen
            self._lines[share].remove((owner, caller, turn))
            self._lines.move_to_end(share)  # served: its next call comes after the others' turns
            if not self._lines[share]:
                del self._lines[share]
            self._take(owner, caller)
            turn.set_result(None)

    def _first_runnable(self, share):
        """The oldest call in ``share``'s line that may run now (its cancelled ones leave it)."""
        line = self._lines[share]
        for entry in list(line):
            owner, caller, turn = entry
            if turn.done():
                line.remove(entry)  # its caller was cancelled while it waited
            elif self._may_run(owner, caller):
                return entry
        if not line:
            del self._lines[share]
        return None

    @property
    def waiting(self) -> int:
        return sum(1 for line in self._lines.values() for _, _, turn in line if not turn.done())


def _share_of(owner, caller):
    """Whose turn a call takes: its caller's, else its owner's."""
    return caller if caller is not None else owner


class Hold:
    """One sync call's place in its lane; it can leave the lane while it waits for the client."""

    def __init__(self, lanes, lane: Lane, owner, caller=None):
        self.lanes, self.lane, self.owner = lanes, lane, owner
        #: Whose share of the waits for clients this call takes (``run``'s ``caller``).
        self.caller = caller
        self.holding = False

    def done(self, _future=None) -> None:
        if self.holding:
            self.holding = False
            self.lane.release(self.owner, self.caller)

    async def client_wait(self, ask):
        """Await ``ask()`` (the client's answer) with this call's thread slot given back."""
        waits = self.lanes.waits
        limits = get_config()
        if waits.total >= limits["SYNC_WAITING_THREADS"]:
            raise TooManyWaiting("The server has too many requests waiting for client answers; try again later.")
        if waits.by_owner[self.owner] >= limits["SYNC_WAITING_PER_SESSION"]:
            raise TooManyWaiting("This session has too many requests waiting for its answers already.")
        if self.caller is not None and waits.by_caller[self.caller] >= limits["SYNC_WAITING_PER_CALLER"]:
            raise TooManyWaiting("This client has too many requests waiting for its answers already.")
        waits.enter(self.owner, self.caller)
        self.done()  # the slot goes to the next call in line while this one waits
        try:
            return await ask()
        finally:
            try:
                await self.lane.acquire(self.owner, self.caller)
                self.holding = True
            finally:
                waits.leave(self.owner, self.caller)


class Waits:
    """Sync tools parked while they wait for their client, per process, per session and per caller."""

    def __init__(self):
        self.total = 0
        self.by_owner = collections.Counter()
        self.by_caller = collections.Counter()

    def enter(self, owner, caller=None):
        self.total += 1
        self.by_owner[owner] += 1
        if caller is not None:
            self.by_caller[caller] += 1

    def leave(self, owner, caller=None):
        self.total -= 1
        _decrement(self.by_owner, owner)
        if caller is not None:
            _decrement(self.by_caller, caller)


def _decrement(counter, key):
    counter[key] -= 1
    if not counter[key]:
        del counter[key]


class Lanes:
    """The lanes of one event loop."""

    def __init__(self):
        config = get_config()
        share, per_caller = config["SYNC_THREADS_PER_SESSION"], config["SYNC_THREADS_PER_CALLER"]
        self.waits = Waits()
        self.by_name = {
            TOOLS: Lane(TOOLS, config["SYNC_TOOL_THREADS"], share, spare_threads=config["SYNC_WAITING_THREADS"],
                        per_caller=per_caller),
            HANDLERS: Lane(HANDLERS, config["SYNC_HANDLER_THREADS"], share, per_caller=per_caller),
            BROKER: Lane(BROKER, BROKER_THREADS, share),
        }


_lanes = weakref.WeakKeyDictionary()


class ConnectionKeepers:
    """The threads that may keep a database connection between calls (CONN_MAX_AGE).

    A lane's pool grows past its running threads by the spare threads of tools parked while they
    wait for a client (SYNC_WAITING_THREADS); any idle thread takes the next call, so were every
    thread to keep its connection, a process would end up holding one per thread it ever made.
    The first ``SYNC_TOOL_THREADS + SYNC_HANDLER_THREADS`` threads to ask keep theirs."""

    def __init__(self):
        self.idents = set()
        self._lock = threading.Lock()

    def may_keep(self) -> bool:
        config = get_config()
        limit = config["SYNC_TOOL_THREADS"] + config["SYNC_HANDLER_THREADS"]
        ident = threading.get_ident()
        with self._lock:
            if ident not in self.idents and len(self.idents) < limit:
                self.idents.add(ident)
            return ident in self.idents


connection_keepers = ConnectionKeepers()
_executors = {}
_executors_lock = threading.Lock()


def _executor(name: str, max_workers: int) -> ThreadPoolExecutor:
    """The process's threads of a lane, shared by every event loop: a thread keeps its database
    connection between calls (CONN_MAX_AGE), so threads made per loop (async_to_sync makes a loop
    per call, as LocalClient's sync methods do) would each leave one open until collected."""
    with _executors_lock:
        found = _executors.get((name, max_workers))
        if found is None:
            found = _executors[name, max_workers] = ThreadPoolExecutor(max_workers, thread_name_prefix=f"mcp-{name}")
        return found


def lanes() -> Lanes:
    loop = asyncio.get_running_loop()
    found = _lanes.get(loop)
    if found is None:
        found = _lanes[loop] = Lanes()
    return found


def owner_of(session_id):
    """The fairness key of a call: its session; a call without one (the modern era) is its own."""
    return session_id or object()


async def run(lane_name: str, owner, func, args=(), kwargs=None, calls_back: bool = False, caller=None,
              on_cancel=None):
    """Run ``func(*args, **kwargs)`` in a thread of the lane, in ``owner``'s share of it and
    ``caller``'s (a principal or client address; None: only its owner's and the process's), its
    waits for the client counted against both.

    ``on_cancel()``: called when the caller is cancelled while the thread still runs.
    ``calls_back``: the function uses a SyncContext, whose methods hop back onto this loop with
    async_to_sync, which needs asgiref's SyncToAsync around the thread; otherwise a plain executor
    call does the same for a fraction of the cost (bench/RESULTS.md)."""
    every = lanes()
    lane = every.by_name[lane_name]
    await lane.acquire(owner, caller)
    hold = Hold(every, lane, owner, caller)
    hold.holding = True
    kwargs = kwargs or {}
    try:
        if calls_back:
            token = _current.set(hold)  # copied into the thread's context, and from it into its hops
            try:
                running = asyncio.ensure_future(SyncToAsync(func, thread_sensitive=False,
                                                            executor=lane.executor)(*args, **kwargs))
            finally:
                _current.reset(token)
        else:
            call = functools.partial(contextvars.copy_context().run, func, *args, **kwargs)
            running = asyncio.get_running_loop().run_in_executor(lane.executor, call)
    except BaseException:
        hold.done()
        raise
    running.add_done_callback(hold.done)  # when the thread ends, even if our caller was cancelled
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        if on_cancel is not None and not running.done():
            on_cancel()  # the thread goes on; what it runs may stop (database_time.py: its query)
        raise


async def client_wait(ask):
    """Await ``ask()``, a client's answer; from a sync tool's thread, without its tool thread."""
    hold = _current.get()
    if hold is None:
        return await ask()
    return await hold.client_wait(ask)
