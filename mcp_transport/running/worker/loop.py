"""Each worker process's event loop, in a daemon thread (``bridge()``): a tool runs in a thread
without one, and the event store, the doorbells and the control channel are asyncio code."""
import asyncio
import concurrent.futures
import os
import threading

from asgiref.sync import SyncToAsync


class LoopThread:
    """An event loop running in a daemon thread; ``run(coro)`` waits for a coroutine on it."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="mcp-jobs-loop", daemon=True)
        self.thread.start()

    def run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result()

    def submit(self, coroutine) -> concurrent.futures.Future:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)


_bridge = None
_bridge_lock = threading.Lock()


def bridge() -> LoopThread:
    """This process's loop thread (a forked pool process starts its own)."""
    global _bridge
    with _bridge_lock:
        if _bridge is None:
            _bridge = LoopThread()
        return _bridge


def _forget_threads_after_fork():
    """Threads do not survive a fork: Celery's parent process may have started the loop thread
    (and asgiref's database thread) before it forks a new pool process, whose copies of them
    would wait forever for threads that are not there."""
    global _bridge, _bridge_lock
    _bridge, _bridge_lock = None, threading.Lock()
    SyncToAsync.single_thread_executor = concurrent.futures.ThreadPoolExecutor(max_workers=1)


os.register_at_fork(after_in_child=_forget_threads_after_fork)
