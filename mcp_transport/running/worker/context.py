"""The Context of a sync tool in a worker (``WorkerContext``: its reports handed to the loop
thread without waiting), and what a cancel stops of a running tool (``_Handle``)."""
import collections
import logging

from ...methods.context import Context, make_sync_method
from .loop import bridge

logger = logging.getLogger(__name__)


#: Notifications a sync tool may have on their way before its next report waits for them.
MAX_UNSENT_NOTIFICATIONS = 100


def _send_notification(method_name):
    """A Context notification method that hands its work to the loop thread and returns at once:
    the tool does not wait a Redis round trip per report. The loop runs them in order, and
    requests to the client and the job's answer queue behind them."""
    async_method = getattr(Context, method_name)

    def method(self, *args, **kwargs):
        pending = self._unsent
        while pending and (pending[0].done() or len(pending) >= MAX_UNSENT_NOTIFICATIONS):
            pending.popleft().result()  # raises what a failed send raised; waits when too many
        pending.append(bridge().submit(async_method(self, *args, **kwargs)))
    method.__name__ = method_name
    method.__doc__ = async_method.__doc__
    return method


class WorkerContext(Context):
    """The Context of a sync tool in a worker: each method runs on the process's loop thread;
    notifications (progress, logs) without waiting for them to be stored."""

    for _name in ("report_progress", "log", "debug", "info", "warning", "error"):
        locals()[_name] = _send_notification(_name)
    for _name in ("send_request", "sample", "elicit", "list_roots", "close_stream"):
        locals()[_name] = make_sync_method(_name, lambda coroutine: bridge().run(coroutine))
    del _name

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self._unsent = collections.deque()

    def wait_unsent(self):
        while self._unsent:
            try:
                self._unsent.popleft().result()
            except Exception:
                logger.warning("a notification of job %s was not stored", self.request_id, exc_info=True)


class _Handle:
    """What ``control.cancel_local`` cancels: the coroutine of an async tool, if it runs one, and
    the waits of its channel for the client's answers (a sync tool blocks on them)."""

    future = None

    def __init__(self, channel):
        self.channel = channel

    def cancel(self):
        if self.future is not None:
            self.future.cancel()
        for waiting in list(self.channel.waiting):  # from the loop thread or the tool's
            waiting.get_loop().call_soon_threadsafe(waiting.cancel)
