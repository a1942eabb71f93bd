"""checks: the system checks on MCP_TRANSPORT."""
import pytest
from django.conf import settings
from django.core import checks
from django.test import override_settings

from mcp_transport.checks import settings_check


def ours(messages):
    return [m for m in messages if m.id and m.id.startswith("mcp_transport.")]


def test_defaults_pass():
    with override_settings(MCP_TRANSPORT={}, DEBUG=False):
        assert settings_check(None) == []


def test_project_settings_pass():
    """The example project runs open unless MCP_AUTH=on: with DEBUG off that is W007 alone."""
    assert settings_check(None) == []
    with override_settings(DEBUG=False):
        assert [m.id for m in ours(checks.run_checks())] == ["mcp_transport.W007"]
    with override_settings(DEBUG=False, MCP_TRANSPORT={**settings.MCP_TRANSPORT, "AUTH": True}):
        assert ours(checks.run_checks()) == []
    with override_settings(DEBUG=True):
        assert ours(checks.run_checks()) == []


def test_auth_validators_that_cannot_be_built_are_e009():
    broken = [{"BACKEND": "mcp_transport.auth.validators.JwtValidator", "OPTIONS": {"issuer": "x"}}]
    with override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "AUTH": True, "AUTH_VALIDATORS": broken}):
        messages = ours(checks.run_checks())
    assert [m.id for m in messages] == ["mcp_transport.E009"]
    assert "jwks_uri" in messages[0].msg


def test_offline_access_scope_is_w008():
    with override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "AUTH": True,
                                          "AUTH_SCOPES": ["mcp", "offline_access"]}):
        assert [m.id for m in ours(checks.run_checks())] == ["mcp_transport.W008"]


def test_unknown_key_is_e001():
    with override_settings(MCP_TRANSPORT={"ALLOWED_ORIGIN": ["https://a.example"]}):
        messages = settings_check(None)
    assert len(messages) == 1
    (error,) = messages
    assert isinstance(error, checks.Error)
    assert error.id == "mcp_transport.E001"
    assert error.level == checks.ERROR
    assert "ALLOWED_ORIGIN" in error.msg
    assert error.hint


def test_unknown_key_through_run_checks():
    with override_settings(MCP_TRANSPORT={"BOGUS": 1}):
        messages = ours(checks.run_checks())
    assert [m.id for m in messages] == ["mcp_transport.E001"]
    assert messages[0].is_serious()


def test_unknown_key_check_is_in_compatibility_tag():
    with override_settings(MCP_TRANSPORT={"BOGUS": 1}):
        assert [m.id for m in ours(checks.run_checks(tags=[checks.Tags.compatibility]))] == ["mcp_transport.E001"]
        assert ours(checks.run_checks(tags=[checks.Tags.security])) == []


NO_ORIGIN = {"ALLOWED_ORIGINS": [], "ALLOW_LOOPBACK_ORIGINS": False}


def test_no_origin_at_all_is_w001():
    with override_settings(DEBUG=False, MCP_TRANSPORT={**NO_ORIGIN, "AUTH": True}):
        messages = settings_check(None)
        assert [m.id for m in ours(checks.run_checks())] == ["mcp_transport.W001"]
    (warning,) = messages
    assert isinstance(warning, checks.Warning)
    assert warning.id == "mcp_transport.W001"
    assert warning.level == checks.WARNING
    assert not warning.is_serious()
    assert "ALLOWED_ORIGINS" in warning.hint


@pytest.mark.parametrize("debug, mcp", [
    (True, NO_ORIGIN),
    (False, {**NO_ORIGIN, "ALLOWED_ORIGINS": ["https://app.example"]}),
    (False, {**NO_ORIGIN, "ALLOW_LOOPBACK_ORIGINS": True}),
    (False, {"ALLOWED_ORIGINS": []}),
])
def test_no_warning_when_some_origin_can_call(debug, mcp):
    with override_settings(DEBUG=debug, MCP_TRANSPORT=mcp):
        assert settings_check(None) == []


def test_error_wins_over_warning():
    with override_settings(DEBUG=False, MCP_TRANSPORT={**NO_ORIGIN, "BOGUS": 1}):
        assert [m.id for m in settings_check(None)] == ["mcp_transport.E001"]


# -- the checks added for operations --------------------------------------------------------

from mcp_transport import checks as mcp_checks  # noqa: E402
from mcp_transport.methods.registry import registry, tool  # noqa: E402

MEMORY_STORE = {"BACKEND": "mcp_transport.storage.memory.InMemoryEventStore"}


def configured(**keys):
    return override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, **keys})


def ids(messages):
    return [m.id for m in messages]


def test_every_check_passes_on_the_project_settings():
    for check in (mcp_checks.redis_check, mcp_checks.values_check, mcp_checks.deployment_check):
        assert check(None) == []


def test_unreachable_redis_is_e003():
    # A port nothing listens on: the free port just closed.
    from mcp_transport.testing import free_port

    with configured(REDIS_URL=f"redis://127.0.0.1:{free_port()}/0"):
        messages = mcp_checks.redis_check(None)
        assert "mcp_transport.E003" in ids(ours(checks.run_checks()))
    (error,) = messages
    assert error.id == "mcp_transport.E003" and error.is_serious()
    assert "correct MCP_TRANSPORT['REDIS_URL']." in error.hint


def test_e003_names_the_cache_location_redis_comes_from(settings):
    from mcp_transport.testing import free_port

    settings.CACHES = {**settings.CACHES, "sessions": {"BACKEND": "django.core.cache.backends.redis.RedisCache",
                                                       "LOCATION": f"redis://127.0.0.1:{free_port()}/0"}}
    with configured(REDIS_URL=None, CACHE_ALIAS="sessions"):
        (error,) = mcp_checks.redis_check(None)
    assert "correct CACHES['sessions']['LOCATION'] (or set MCP_TRANSPORT['REDIS_URL'])." in error.hint, error.hint


@pytest.mark.parametrize("key, value", [
    ("SESSION_IDLE_TIMEOUT", 0), ("HEARTBEAT_SECONDS", -1), ("KEEPALIVE_SECONDS", "15"),
    ("PAGE_SIZE", None), ("MAX_REQUEST_BYTES", True), ("SSE_RETRY_MS", -5), ("POLL_AFTER_SECONDS", "0"),
    ("EVENT_RETENTION", -1), ("CLOSED_SESSION_RETENTION", "a week"), ("METRICS_ACCESS", "public"),
    ("JOB_RETENTION", -3600), ("TASK_DEFAULT_TTL_MS", 0), ("TASK_MAX_TTL_MS", "1d"), ("PROGRESS_HEARTBEAT_SECONDS", -1),
    ("MAX_HEADER_BYTES", 0), ("MAX_HEADERS", "100"), ("REQUEST_RECEIVE_SECONDS", None), ("IDLE_CONNECTION_SECONDS", -1),
    ("MAX_SESSIONS_PER_ADDRESS", 0), ("MAX_CALLS_PER_SESSION", None), ("TOOL_MAX_SECONDS", -1),
    ("MAX_EVENT_BYTES", "1M"), ("MAX_CLIENT_INFO_BYTES", 0), ("MAX_SUBSCRIPTIONS_PER_SESSION", -1),
    ("MAX_URI_BYTES", 0), ("TRUSTED_PROXIES", "10.0.0.0/8"), ("TRUSTED_PROXIES", ["10.0.0.0/33"]),
    ("CLEANUP_INTERVAL", -1), ("CALL_LOG_SAMPLE", 1.5), ("CALL_LOG_SAMPLE", None), ("CALL_LOG_RETENTION", -1),
])
def test_bad_values_are_e004(key, value):
    with configured(**{key: value}):
        messages = mcp_checks.values_check(None)
    assert ids(messages) == ["mcp_transport.E004"]
    assert key in messages[0].msg and repr(value) in messages[0].msg


@pytest.mark.parametrize("key, value", [("SSE_RETRY_MS", None), ("POLL_AFTER_SECONDS", 0), ("EVENT_RETENTION", None),
                                        ("CLOSED_SESSION_RETENTION", 0), ("HEARTBEAT_SECONDS", 0.5),
                                        ("TOOL_MAX_SECONDS", None), ("TRUSTED_PROXIES", ["10.0.0.0/8", "::1"])])
def test_good_edge_values_pass(key, value):
    with configured(**{key: value}):
        assert mcp_checks.values_check(None) == []


def test_token_access_without_a_token_is_e005():
    with configured(METRICS_ACCESS="token", METRICS_TOKEN=""):
        assert ids(mcp_checks.values_check(None)) == ["mcp_transport.E005"]
    with configured(METRICS_ACCESS="token", METRICS_TOKEN="s3cret-token"):
        assert mcp_checks.values_check(None) == []


def test_process_local_store_with_debug_off_is_w002(monkeypatch):
    # Only W002 here: the example catalogue's background tools would add E006 (tested below).
    monkeypatch.setattr(registry, "tools", {n: s for n, s in registry.tools.items() if not s.background})
    with override_settings(DEBUG=False), configured(EVENT_STORE=MEMORY_STORE):
        messages = mcp_checks.deployment_check(None)
    assert ids(messages) == ["mcp_transport.W002"]
    assert "InMemoryEventStore" in messages[0].msg
    with override_settings(DEBUG=True), configured(EVENT_STORE=MEMORY_STORE):
        assert mcp_checks.deployment_check(None) == []  # development: one process is fine


def test_process_local_channel_layer_with_debug_off_is_w002():
    layers = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
    with override_settings(DEBUG=False, CHANNEL_LAYERS=layers):
        messages = mcp_checks.deployment_check(None)
    assert ids(messages) == ["mcp_transport.W002"]
    assert "CHANNEL_LAYERS['default']" in messages[0].msg
    redis_layer = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer"}}
    with override_settings(DEBUG=False, CHANNEL_LAYERS=redis_layer):
        assert mcp_checks.deployment_check(None) == []


def test_event_retention_shorter_than_stream_ttl_is_w003():
    with configured(EVENT_RETENTION=600, STREAM_TTL=3600):
        messages = mcp_checks.deployment_check(None)
    assert ids(messages) == ["mcp_transport.W003"]
    assert "600" in messages[0].msg and "3600" in messages[0].msg
    with configured(EVENT_RETENTION=3600, STREAM_TTL=3600):
        assert mcp_checks.deployment_check(None) == []


def test_polling_without_retry_is_w004():
    with configured(POLL_AFTER_SECONDS=0, SSE_RETRY_MS=None):
        assert ids(mcp_checks.deployment_check(None)) == ["mcp_transport.W004"]
    with configured(POLL_AFTER_SECONDS=0, SSE_RETRY_MS=500):
        assert mcp_checks.deployment_check(None) == []


@pytest.fixture
def background_tool():
    @tool(name="check_background_probe", background=True)
    def probe() -> str:
        """A background tool, registered for the duration of one test."""
        return "ok"

    yield "check_background_probe"
    del registry.tools["check_background_probe"]


def test_background_tool_with_process_local_store_is_e006(background_tool):
    with override_settings(DEBUG=True), configured(EVENT_STORE=MEMORY_STORE):
        messages = mcp_checks.deployment_check(None)
    assert ids(messages) == ["mcp_transport.E006"]
    assert background_tool in messages[0].msg
    with override_settings(DEBUG=True):
        assert mcp_checks.deployment_check(None) == []


def test_background_tool_without_broker_is_e007(background_tool, monkeypatch):
    from celery import current_app

    monkeypatch.setattr(current_app.conf, "broker_url", None)
    with override_settings(CELERY_BROKER_URL=None):
        messages = mcp_checks.deployment_check(None)
    assert ids(messages) == ["mcp_transport.E007"]
    assert background_tool in messages[0].msg and "CELERY_BROKER_URL" in messages[0].hint


def test_manage_py_check_passes_on_the_project():
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "mcpserver.settings", "DJANGO_DEBUG": "0"}
    done = subprocess.run([sys.executable, "manage.py", "check", "--fail-level", "WARNING"], cwd=root,
                          env={**env, "MCP_AUTH": "on"}, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no issues" in done.stdout
    # Open (the default, for local use and conformance runs) with DEBUG off: W007 says so.
    done = subprocess.run([sys.executable, "manage.py", "check"], cwd=root, env={**env, "MCP_AUTH": "off"},
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "mcp_transport.W007" in done.stdout + done.stderr, done.stdout + done.stderr


def test_job_retention_shorter_than_the_longest_task_ttl_is_w005():
    with configured(JOB_RETENTION=3600, TASK_MAX_TTL_MS=24 * 3600 * 1000):
        messages = mcp_checks.deployment_check(None)
    assert ids(messages) == ["mcp_transport.W005"]
    assert "86400 s" in messages[0].msg
    with configured(JOB_RETENTION=3600, TASK_MAX_TTL_MS=None):
        assert ids(mcp_checks.deployment_check(None)) == ["mcp_transport.W005"]  # unlimited ttl
    for fine in ({"JOB_RETENTION": 86400, "TASK_MAX_TTL_MS": 86400 * 1000}, {"JOB_RETENTION": None}):
        with configured(**fine):
            assert mcp_checks.deployment_check(None) == []


def answers(monkeypatch, registered, queues):
    monkeypatch.setattr(mcp_checks, "_ask_workers", lambda: (registered, queues))


def test_workers_check_runs_only_when_asked(monkeypatch, background_tool):
    asked = []
    monkeypatch.setattr(mcp_checks, "_ask_workers", lambda: asked.append(1) or ({}, {}))
    checks.run_checks()  # what migrate and runserver run: no broadcast, no wait
    assert asked == []
    messages = ours(checks.run_checks(tags=[mcp_checks.WORKERS_TAG], include_deployment_checks=True))
    assert asked == [1] and ids(messages) == ["mcp_transport.W006"]
    assert "No Celery worker answered" in messages[0].msg
    assert messages[0].hint == "Start one with: celery -A mcpserver worker"  # the project's Celery app


def test_worker_without_the_task_is_e008(monkeypatch, background_tool):
    answers(monkeypatch, {"good@h": ["mcp_transport.run_job [acks_late=True]", "mcp_transport.cleanup"],
                          "old@h": ["mcp_transport.cleanup"]},
            {"good@h": [{"name": "celery"}], "old@h": [{"name": "celery"}]})
    messages = mcp_checks.workers_check(None)
    assert ids(messages) == ["mcp_transport.E008"]
    assert "old@h" in messages[0].msg and "good@h" not in messages[0].msg


def test_unconsumed_queue_of_a_background_tool_is_w006(monkeypatch, background_tool):
    @tool(name="check_queue_probe", background={"queue": "reports"})
    def probe() -> str:
        """A background tool on a queue of its own."""
        return "ok"

    try:
        answers(monkeypatch, {"w@h": [mcp_checks.RUN_JOB]}, {"w@h": [{"name": "celery"}]})
        messages = mcp_checks.workers_check(None)
    finally:
        del registry.tools["check_queue_probe"]
    assert ids(messages) == ["mcp_transport.W006"] and "reports" in messages[0].msg
    assert messages[0].hint == "Start a worker with: celery -A mcpserver worker -Q reports"


def test_workers_check_passes_when_the_workers_fit(monkeypatch, background_tool):
    answers(monkeypatch, {"w@h": [mcp_checks.RUN_JOB]}, {"w@h": [{"name": "celery"}]})
    assert mcp_checks.workers_check(None) == []


@pytest.mark.parametrize("key, value, said", [
    ("SERVER_DESCRIPTION", "x" * 101, "SERVER_DESCRIPTION"), ("SERVER_TITLE", "", "SERVER_TITLE"),
    ("SERVER_WEBSITE_URL", "example.com", "http(s) URL"), ("SERVER_ICONS", "https://example.com/i.png", "a list"),
    ("SERVER_ICONS", [{"src": "ftp://example.com/i.png"}], "src"), ("SERVER_VERSION", 2, "SERVER_VERSION"),
    ("SERVER_NAME", "", "SERVER_NAME")])
def test_server_info_values_are_e004(key, value, said):
    from mcp_transport.checks import values_check

    with override_settings(MCP_TRANSPORT={key: value}):
        messages = values_check(None)
        assert ours(checks.run_checks(include_deployment_checks=True, tags=[checks.Tags.compatibility])) == messages
    assert [m.id for m in messages] == ["mcp_transport.E004"] and said in messages[0].msg


def test_no_server_card_is_w010_of_check_deploy_only():
    with override_settings(MCP_TRANSPORT={}, DEBUG=False):
        assert ours(checks.run_checks(tags=[checks.Tags.compatibility])) == []
        messages = ours(checks.run_checks(tags=[checks.Tags.compatibility], include_deployment_checks=True))
    assert [m.id for m in messages] == ["mcp_transport.W010"]
    assert "'django-mcp-transport' is not a reverse-DNS name" in messages[0].msg and "/server-card" in messages[0].msg
    with override_settings(MCP_TRANSPORT={"SERVER_NAME": "com.example/weather"}):
        messages = ours(checks.run_checks(tags=[checks.Tags.compatibility], include_deployment_checks=True))
    assert [m.id for m in messages] == ["mcp_transport.W010"] and "SERVER_DESCRIPTION" in messages[0].msg
    with override_settings(MCP_TRANSPORT={"SERVER_NAME": "com.example/weather", "SERVER_DESCRIPTION": "Forecasts."}):
        assert ours(checks.run_checks(tags=[checks.Tags.compatibility], include_deployment_checks=True)) == []


@pytest.mark.filterwarnings("ignore:Overriding setting DATABASES")
def test_persistent_connections_that_nothing_closes_are_w011():
    """Under ASGI each Django request runs in a thread of its own: with a persistent CONN_MAX_AGE
    its connection outlived it (issue 38: 126 registrations held 96 of PostgreSQL's 100)."""
    from django.core.signals import request_finished

    from mcp_transport.transports import serving

    closed = {alias: {**database, "CONN_MAX_AGE": 0} for alias, database in settings.DATABASES.items()}
    persistent = {alias: {**database, "CONN_MAX_AGE": 60} for alias, database in settings.DATABASES.items()}
    with override_settings(DATABASES=persistent):
        assert mcp_checks.connections_check(None) == []  # the app closes them (its ready())
        request_finished.disconnect(dispatch_uid=serving.CLOSE_REQUEST_CONNECTIONS)
        try:
            assert ids(mcp_checks.connections_check(None)) == ["mcp_transport.W011"]
            with override_settings(DATABASES=closed):  # nothing kept: nothing to close
                assert mcp_checks.connections_check(None) == []
        finally:
            serving.close_connections_after_django_requests()
    assert serving.closes_request_connections()
