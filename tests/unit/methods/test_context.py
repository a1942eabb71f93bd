"""context: Context and SyncContext against a fake channel (no streams, no Redis)."""
import asyncio
import inspect
import threading

import pytest
from asgiref.sync import sync_to_async

from mcp_transport.methods.context import LOG_LEVELS, ClientCapabilityError, Context, SyncContext, ToolCancelled


class FakeChannel:
    """What a Context needs of its request's stream; records what is sent and on which thread."""

    def __init__(self, response=None):
        self.request_id = 7
        self.cancelled = False
        self.response = {} if response is None else response
        self.notifications = []
        self.requests = []
        self.closed = []
        self.threads = []

    async def notify(self, method, params):
        self.threads.append(threading.current_thread())
        self.notifications.append((method, params))

    async def request(self, method, params, **_options):
        self.threads.append(threading.current_thread())
        self.requests.append((method, params))
        return self.response

    async def close_stream(self, retry_ms):
        self.threads.append(threading.current_thread())
        self.closed.append(retry_ms)


def make(cls=Context, **kwargs):
    channel = kwargs.pop("channel", None) or FakeChannel()
    options = {"session_id": "s" * 32, "request_id": 7, **kwargs}
    return cls(channel=channel, **options), channel


# --- progress -------------------------------------------------------------------------------

async def test_progress_without_token_sends_nothing():
    ctx, channel = make()
    await ctx.report_progress(1, 10, "one")
    await ctx.report_progress(2)
    assert channel.notifications == []


class JobChannel(FakeChannel):
    """A background job's channel: it also keeps the progress for the job's row."""

    def __init__(self):
        super().__init__()
        self.observed = []

    async def observe_progress(self, progress, total, message):
        self.observed.append((progress, total, message))


@pytest.mark.parametrize("token", [None, "tok"])
async def test_a_jobs_channel_observes_every_report_token_or_not(token):
    ctx, channel = make(channel=JobChannel(), progress_token=token)
    await ctx.report_progress(1, 10, "one")
    await ctx.report_progress(1, 10, "again")  # progress must increase: dropped for both
    await ctx.report_progress(2)
    assert channel.observed == [(1, 10, "one"), (2, None, None)]
    assert len(channel.notifications) == (0 if token is None else 2)


async def test_progress_with_token():
    ctx, channel = make(progress_token="tok")
    await ctx.report_progress(1)
    assert channel.notifications == [("notifications/progress", {"progressToken": "tok", "progress": 1})]


@pytest.mark.parametrize("token", [0, "", "abc", 12])
async def test_progress_any_token_value_but_none_counts(token):
    ctx, channel = make(progress_token=token)
    await ctx.report_progress(0.5)
    assert channel.notifications == [("notifications/progress", {"progressToken": token, "progress": 0.5})]


async def test_progress_total_and_message_only_when_given():
    ctx, channel = make(progress_token=1)
    await ctx.report_progress(1, total=10)
    await ctx.report_progress(2, message="half")
    await ctx.report_progress(3, 10, "most")
    await ctx.report_progress(4, total=0)
    assert [params for _, params in channel.notifications] == [
        {"progressToken": 1, "progress": 1, "total": 10},
        {"progressToken": 1, "progress": 2, "message": "half"},
        {"progressToken": 1, "progress": 3, "total": 10, "message": "most"},
        {"progressToken": 1, "progress": 4, "total": 0},
    ]


async def test_progress_must_increase():
    ctx, channel = make(progress_token="t")
    for value in (0, 1, 1, 0.5, 2, 1.5, 2, 2.0001, 10, 9):
        await ctx.report_progress(value)
    sent = [params["progress"] for _, params in channel.notifications]
    assert sent == [0, 1, 2, 2.0001, 10]
    assert all(a < b for a, b in zip(sent, sent[1:]))


async def test_dropped_progress_is_logged(caplog):
    ctx, channel = make(progress_token="t")
    await ctx.report_progress(5)
    with caplog.at_level("WARNING", logger="mcp_transport.methods.context"):
        await ctx.report_progress(5)
    assert len(channel.notifications) == 1
    assert any("progress must increase" in record.getMessage() for record in caplog.records)


# --- logging --------------------------------------------------------------------------------

@pytest.mark.parametrize("threshold", LOG_LEVELS)
async def test_log_level_filtering(threshold):
    ctx, channel = make(log_level=threshold)
    for level in LOG_LEVELS:
        await ctx.log(level, f"at {level}")
    sent = [params["level"] for _, params in channel.notifications]
    assert sent == list(LOG_LEVELS[LOG_LEVELS.index(threshold):])
    assert threshold in sent  # the threshold itself is sent
    below = LOG_LEVELS.index(threshold) - 1
    if below >= 0:
        assert LOG_LEVELS[below] not in sent  # the level just below is not


async def test_log_message_shape():
    ctx, channel = make(log_level="debug")
    await ctx.log("notice", {"k": [1]})
    await ctx.log("error", "text", logger_name="db")
    assert channel.notifications == [
        ("notifications/message", {"level": "notice", "data": {"k": [1]}}),
        ("notifications/message", {"level": "error", "data": "text", "logger": "db"}),
    ]


async def test_default_log_level_is_info():
    ctx, channel = make()
    await ctx.debug("no")
    await ctx.info("yes")
    assert [params["data"] for _, params in channel.notifications] == ["yes"]


async def test_level_helpers():
    ctx, channel = make(log_level="debug")
    await ctx.debug("d")
    await ctx.info("i", "lg")
    await ctx.warning("w")
    await ctx.error("e")
    assert [(p["level"], p["data"], p.get("logger")) for _, p in channel.notifications] == [
        ("debug", "d", None), ("info", "i", "lg"), ("warning", "w", None), ("error", "e", None)]


# --- requests to the client -----------------------------------------------------------------

async def test_send_request_refuses_undeclared_capability():
    ctx, channel = make(client_capabilities={"roots": {}})
    with pytest.raises(ClientCapabilityError, match="'sampling'"):
        await ctx.send_request("sampling/createMessage", {}, "sampling")
    assert channel.requests == []


async def test_send_request_passes_declared_capability():
    ctx, channel = make(client_capabilities={"sampling": {}}, channel=FakeChannel({"ok": 1}))
    assert await ctx.send_request("sampling/createMessage", {"a": 1}, "sampling") == {"ok": 1}
    assert channel.requests == [("sampling/createMessage", {"a": 1})]


async def test_send_request_without_capability_needs_none():
    ctx, channel = make()
    await ctx.send_request("ping")
    assert channel.requests == [("ping", {})]


async def test_sample():
    response = {"role": "assistant", "content": {"type": "text", "text": "4"}, "model": "m"}
    ctx, channel = make(client_capabilities={"sampling": {}}, channel=FakeChannel(response))
    assistant = {"role": "assistant", "content": {"type": "text", "text": "earlier"}}
    result = await ctx.sample(["2+2?", assistant], max_tokens=50, systemPrompt="Be brief.")
    assert result == response
    assert channel.requests == [("sampling/createMessage", {
        "messages": [{"role": "user", "content": {"type": "text", "text": "2+2?"}}, assistant],
        "maxTokens": 50,
        "systemPrompt": "Be brief.",
    })]


async def test_sample_needs_sampling_capability():
    ctx, channel = make(client_capabilities={"elicitation": {}})
    with pytest.raises(ClientCapabilityError):
        await ctx.sample(["hi"], max_tokens=1)
    assert channel.requests == []


async def test_elicit():
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}
    response = {"action": "accept", "content": {"name": "Ada"}}
    ctx, channel = make(client_capabilities={"elicitation": {}}, channel=FakeChannel(response))
    assert await ctx.elicit("Your name?", schema) == response
    assert channel.requests == [("elicitation/create", {"message": "Your name?", "requestedSchema": schema})]


async def test_elicit_needs_elicitation_capability():
    ctx, channel = make(client_capabilities={"sampling": {}})
    with pytest.raises(ClientCapabilityError):
        await ctx.elicit("?", {})
    assert channel.requests == []


async def test_list_roots():
    roots = [{"uri": "file:///a", "name": "a"}]
    ctx, channel = make(client_capabilities={"roots": {"listChanged": True}},
                        channel=FakeChannel({"roots": roots}))
    assert await ctx.list_roots() == roots
    assert channel.requests == [("roots/list", {})]


async def test_list_roots_without_roots_key():
    ctx, _ = make(client_capabilities={"roots": {}})
    assert await ctx.list_roots() == []


async def test_list_roots_needs_roots_capability():
    ctx, channel = make()
    with pytest.raises(ClientCapabilityError):
        await ctx.list_roots()
    assert channel.requests == []


async def test_close_stream():
    ctx, channel = make()
    await ctx.close_stream(250)
    await ctx.close_stream()
    assert channel.closed == [250, None]


# --- cancellation and attributes ------------------------------------------------------------

def test_check_cancelled():
    ctx, channel = make()
    assert ctx.cancelled is False
    ctx.check_cancelled()  # does not raise
    channel.cancelled = True
    assert ctx.cancelled is True
    with pytest.raises(ToolCancelled, match="7"):
        ctx.check_cancelled()


def test_attributes():
    ctx, _ = make(progress_token="p", user="u", client_capabilities=None, log_level="debug")
    assert (ctx.session_id, ctx.request_id, ctx.progress_token, ctx.user) == ("s" * 32, 7, "p", "u")
    assert ctx.client_capabilities == {}
    assert ctx.log_level == "debug"


# --- SyncContext ----------------------------------------------------------------------------

SYNC_METHODS = ("report_progress", "log", "debug", "info", "warning", "error", "send_request", "sample",
                "elicit", "list_roots", "close_stream")


@pytest.mark.parametrize("name", SYNC_METHODS)
def test_sync_context_methods_are_plain_callables(name):
    method = getattr(SyncContext, name)
    assert callable(method)
    assert not inspect.iscoroutinefunction(method)
    assert inspect.iscoroutinefunction(getattr(Context, name))
    assert method.__name__ == name


def in_worker(func):
    return sync_to_async(func, thread_sensitive=False)


async def test_sync_context_from_worker_thread():
    response = {"roots": [{"uri": "file:///r"}]}
    ctx, channel = make(SyncContext, progress_token="t", log_level="warning",
                        client_capabilities={"roots": {}, "sampling": {}}, channel=FakeChannel(response))
    loop_thread = threading.current_thread()

    def tool():
        worker = threading.current_thread()
        assert worker is not loop_thread
        ctx.report_progress(1, 2, "half")
        ctx.report_progress(1)  # dropped: not increasing
        ctx.info("dropped: below warning")
        ctx.warning("careful")
        roots = ctx.list_roots()
        sampled = ctx.sample(["hi"], max_tokens=5)
        ctx.close_stream(100)
        return worker, roots, sampled

    worker, roots, sampled = await in_worker(tool)()
    assert worker is not loop_thread
    assert roots == response["roots"]
    assert sampled == response
    assert channel.notifications == [
        ("notifications/progress", {"progressToken": "t", "progress": 1, "total": 2, "message": "half"}),
        ("notifications/message", {"level": "warning", "data": "careful"}),
    ]
    assert [method for method, _ in channel.requests] == ["roots/list", "sampling/createMessage"]
    assert channel.closed == [100]
    # The channel itself is driven on the event loop's thread, not the worker.
    assert channel.threads and all(thread is loop_thread for thread in channel.threads)


async def test_sync_context_capability_error_reaches_the_worker():
    ctx, channel = make(SyncContext)

    def tool():
        with pytest.raises(ClientCapabilityError):
            ctx.elicit("?", {})
        return "done"

    assert await in_worker(tool)() == "done"
    assert channel.requests == []


async def test_sync_context_check_cancelled_in_worker():
    ctx, channel = make(SyncContext)
    channel.cancelled = True
    with pytest.raises(ToolCancelled):
        await in_worker(ctx.check_cancelled)()


@pytest.mark.parametrize("call, expected", [
    (lambda ctx: ctx.debug("d"), ("notify", "notifications/message", {"level": "debug", "data": "d"})),
    (lambda ctx: ctx.info("i", "lg"), ("notify", "notifications/message",
                                       {"level": "info", "data": "i", "logger": "lg"})),
    (lambda ctx: ctx.warning("w"), ("notify", "notifications/message", {"level": "warning", "data": "w"})),
    (lambda ctx: ctx.error("e"), ("notify", "notifications/message", {"level": "error", "data": "e"})),
    (lambda ctx: ctx.log("alert", "a"), ("notify", "notifications/message", {"level": "alert", "data": "a"})),
    (lambda ctx: ctx.report_progress(3), ("notify", "notifications/progress", {"progressToken": "t",
                                                                               "progress": 3})),
    (lambda ctx: ctx.send_request("ping"), ("request", "ping", {})),
    (lambda ctx: ctx.sample(["q"], max_tokens=1), ("request", "sampling/createMessage", {
        "messages": [{"role": "user", "content": {"type": "text", "text": "q"}}], "maxTokens": 1})),
    (lambda ctx: ctx.elicit("m", {"type": "object"}), ("request", "elicitation/create",
                                                       {"message": "m", "requestedSchema": {"type": "object"}})),
    (lambda ctx: ctx.list_roots(), ("request", "roots/list", {})),
])
async def test_every_sync_context_helper_works_in_a_worker(call, expected):
    # Regression: the helpers built on log()/send_request() called SyncContext's blocking
    # wrappers on the event loop ("You cannot use AsyncToSync in the same thread...").
    ctx, channel = make(SyncContext, progress_token="t", log_level="debug",
                        client_capabilities={"sampling": {}, "elicitation": {}, "roots": {}})
    await in_worker(lambda: call(ctx))()
    kind, method, params = expected
    sent = channel.notifications if kind == "notify" else channel.requests
    assert sent == [(method, params)]


class ConnectionWatchingChannel(FakeChannel):
    """Records, when the client is asked, whether the asking thread's connection is open."""

    def __init__(self):
        super().__init__({"action": "accept", "content": {}})
        self.connection, self.open_while_asked = None, []

    async def request(self, method, params, **_options):
        self.open_while_asked.append(self.connection.connection is not None)
        return await super().request(method, params)


@pytest.fixture
def managed_connections():
    """Sync code manages its database connections, as in a server (the suite turns it off)."""
    from mcp_transport.methods.context import manage_connections
    token = manage_connections.set(True)
    yield
    manage_connections.reset(token)


@pytest.mark.django_db(transaction=True)
async def test_a_sync_tool_waiting_for_its_client_holds_no_database_connection(managed_connections):
    """A process has SYNC_WAITING_THREADS such waits: with a connection each, one client's
    unanswered questions could take the database's max_connections from everyone."""
    from django.contrib.auth.models import User
    from django.db import connections, transaction

    if connections["default"].vendor == "sqlite" and connections["default"].is_in_memory_db():
        pytest.skip("Django never closes an in-memory SQLite test database (CI runs this on PostgreSQL)")
    ctx, channel = make(SyncContext, client_capabilities={"elicitation": {}}, channel=ConnectionWatchingChannel())

    def tool():
        User.objects.count()  # this thread's connection is open now
        channel.connection = connections["default"]  # this thread's, not a proxy read on the loop
        assert channel.connection.connection is not None
        ctx.elicit("Go on?", {"type": "object"})
        with transaction.atomic():  # a transaction open across the question keeps its connection
            User.objects.count()
            ctx.elicit("Sure?", {"type": "object"})
        return User.objects.count()  # and a query after the answer connects again

    assert await in_worker(tool)() == 0
    assert channel.open_while_asked == [False, True]


@pytest.mark.django_db(transaction=True)
async def test_threads_past_the_keepers_close_their_connection_when_the_call_ends(monkeypatch, managed_connections):
    """A lane grows spare threads for tools parked on their clients, and any idle thread takes
    the next call: were each to keep its connection, a process would hold one per thread it ever
    made. The first SYNC_TOOL_THREADS + SYNC_HANDLER_THREADS threads keep theirs (CONN_MAX_AGE)."""
    from django.contrib.auth.models import User
    from django.db import connections

    from mcp_transport.methods import dispatch, threads

    if connections["default"].vendor == "sqlite" and connections["default"].is_in_memory_db():
        pytest.skip("Django never closes an in-memory SQLite test database (CI runs this on PostgreSQL)")
    monkeypatch.setitem(connections["default"].settings_dict, "CONN_MAX_AGE", 60)  # the suite's is 0
    used = []

    def tool():
        User.objects.count()
        used.append(connections["default"])

    open_after = []
    try:
        for keepers in (threads.ConnectionKeepers(), threads.ConnectionKeepers()):
            monkeypatch.setattr(threads, "connection_keepers", keepers)
            if open_after:  # the second time every keeper's place is taken by other threads
                keepers.idents.update(range(-1000, 0))  # more than any limit
            await dispatch.run_sync_or_async(tool, lane=threads.TOOLS)
            open_after.append(used[-1].connection is not None)
    finally:
        def close(wrapper):
            wrapper.inc_thread_sharing()
            wrapper.close()
            wrapper.dec_thread_sharing()
        for wrapper in used:  # the next test's sync code runs in its thread: leave it no connection
            await asyncio.to_thread(close, wrapper)
    assert open_after == [True, False]
