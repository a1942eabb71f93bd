"""System checks for settings that cannot work (``manage.py check``; also run by migrate).

- mcp_transport.E001: MCP_TRANSPORT has unknown keys.
- mcp_transport.E002: EVENT_STORE cannot be built (BACKEND not importable, or OPTIONS refused).
- mcp_transport.E003: Redis does not answer PING (sessions, events and control live there).
- mcp_transport.E004: a setting has a value of the wrong type or range.
- mcp_transport.E005: METRICS_ACCESS is "token" without a METRICS_TOKEN.
- mcp_transport.E006: background tools with a process-local event store (workers are other
  processes: their events would never reach the web processes).
- mcp_transport.E007: background tools without a Celery broker.
- mcp_transport.W001: ALLOWED_ORIGINS is empty with DEBUG off (only loopback browsers can call).
- mcp_transport.W002: a process-local event store or channel layer with DEBUG off (a deployment
  runs several web processes, and a client's next request may land on any of them).
- mcp_transport.W003: EVENT_RETENTION shorter than STREAM_TTL (the database, Redis's fallback,
  would forget events that Redis still replays).
- mcp_transport.W004: polling mode without SSE_RETRY_MS (clients get no pace for their polls).
- mcp_transport.W005: JOB_RETENTION shorter than the longest task ttl (TASK_MAX_TTL_MS): the
  cleanup would delete tasks that clients may still ask for.
"""
from numbers import Real

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured

from .conf import get_config, redis_url

#: Keys that must be numbers > 0 (None allowed where the value means "never" or "off").
POSITIVE = ("SESSION_IDLE_TIMEOUT", "MAX_REQUEST_BYTES", "KEEPALIVE_SECONDS", "HEARTBEAT_SECONDS",
            "CLIENT_REQUEST_TIMEOUT", "PAGE_SIZE", "REDIS_MAX_CONNECTIONS", "DASHBOARD_SAMPLE_SECONDS",
            "DASHBOARD_SAMPLES", "TASK_DEFAULT_TTL_MS", "TASK_POLL_INTERVAL_MS")
#: Keys that may be None, else numbers >= 0.
OPTIONAL_NON_NEGATIVE = ("SSE_RETRY_MS", "POLL_AFTER_SECONDS", "CLOSED_SESSION_RETENTION", "EVENT_RETENTION",
                         "JOB_RETENTION", "PROGRESS_HEARTBEAT_SECONDS", "TASK_MAX_TTL_MS")
METRICS_ACCESS = ("off", "staff", "token")
PROCESS_LOCAL_STORES = ("mcp_transport.storage.memory.InMemoryEventStore",)
PROCESS_LOCAL_LAYERS = ("channels.layers.InMemoryChannelLayer",)


def _config():
    """The settings, or None when E001 already reports them."""
    try:
        return get_config()
    except ImproperlyConfigured:
        return None


@register(Tags.compatibility)
def settings_check(app_configs, **kwargs):
    try:
        config = get_config()
    except ImproperlyConfigured as exc:
        return [Error(str(exc), hint="See mcp_transport/conf.py for the keys.", id="mcp_transport.E001")]
    if not settings.DEBUG and not config["ALLOWED_ORIGINS"] and not config["ALLOW_LOOPBACK_ORIGINS"]:
        return [Warning("No browser origin may call the MCP endpoint.",
                        hint="Set MCP_TRANSPORT['ALLOWED_ORIGINS'].", id="mcp_transport.W001")]
    return []


@register(Tags.compatibility)
def event_store_check(app_configs, **kwargs):
    from .storage import get_event_store

    if _config() is None:
        return []
    try:
        get_event_store()
    except Exception as exc:
        return [Error(f"MCP_TRANSPORT['EVENT_STORE'] cannot be built: {exc!r}",
                      hint="BACKEND is a dotted path to an EventStore class; OPTIONS are its keyword arguments.",
                      id="mcp_transport.E002")]
    return []


@register(Tags.caches)
def redis_check(app_configs, **kwargs):
    import redis

    if _config() is None:
        return []
    try:
        url = redis_url()
        client = redis.Redis.from_url(url, socket_connect_timeout=2, socket_timeout=2)
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:
        return [Error(f"Redis does not answer: {exc}",
                      hint="Sessions, events and cross-process control need Redis: start it, or set "
                           "MCP_TRANSPORT['REDIS_URL'] (or the LOCATION of CACHES[CACHE_ALIAS]).",
                      id="mcp_transport.E003")]
    return []


@register(Tags.compatibility)
def values_check(app_configs, **kwargs):
    config = _config()
    if config is None:
        return []
    errors = [_value_error(name, config[name], "a number > 0") for name in POSITIVE
              if not _number(config[name]) or config[name] <= 0]
    errors += [_value_error(name, config[name], "None or a number >= 0") for name in OPTIONAL_NON_NEGATIVE
               if config[name] is not None and (not _number(config[name]) or config[name] < 0)]
    if config["METRICS_ACCESS"] not in METRICS_ACCESS:
        errors.append(_value_error("METRICS_ACCESS", config["METRICS_ACCESS"], " or ".join(map(repr, METRICS_ACCESS))))
    elif config["METRICS_ACCESS"] == "token" and not config["METRICS_TOKEN"]:
        errors.append(Error("METRICS_ACCESS is 'token' but METRICS_TOKEN is empty: nobody could read the metrics.",
                            hint="Set MCP_TRANSPORT['METRICS_TOKEN'] to a long random string.",
                            id="mcp_transport.E005"))
    return errors


def _number(value) -> bool:
    return isinstance(value, Real) and not isinstance(value, bool)


def _value_error(name, value, expected):
    return Error(f"MCP_TRANSPORT['{name}'] must be {expected}, not {value!r}.", id="mcp_transport.E004")


@register(Tags.compatibility)
def deployment_check(app_configs, **kwargs):
    """Combinations of settings that work in one process, or not at all."""
    config = _config()
    if config is None:
        return []
    store = config["EVENT_STORE"].get("BACKEND", "")
    messages = []
    if not settings.DEBUG:
        messages += _process_local_warnings(store)
    if _background_tools():
        messages += _background_errors(store)
    retention, ttl = config["EVENT_RETENTION"], config["STREAM_TTL"]
    if _number(retention) and _number(ttl) and retention < ttl:
        messages.append(Warning(
            f"EVENT_RETENTION ({retention} s) is shorter than STREAM_TTL ({ttl} s): the cleanup deletes database "
            "rows that are a replay's fallback while Redis still keeps their events.",
            hint="Keep EVENT_RETENTION >= STREAM_TTL.", id="mcp_transport.W003"))
    messages += _job_retention_warnings(config)
    if config["POLL_AFTER_SECONDS"] is not None and config["SSE_RETRY_MS"] is None:
        messages.append(Warning(
            "Polling mode (POLL_AFTER_SECONDS) closes connections without a retry field (SSE_RETRY_MS is None), "
            "so clients poll at a pace of their own choosing.",
            hint="Set SSE_RETRY_MS: \"the server SHOULD send an SSE event with a standard retry field before "
                 "closing the connection\" (spec 2025-11-25).", id="mcp_transport.W004"))
    return messages


def _job_retention_warnings(config):
    retention, max_ttl_ms = config["JOB_RETENTION"], config.get("TASK_MAX_TTL_MS")
    if not _number(retention):
        return []
    if max_ttl_ms is None or (_number(max_ttl_ms) and retention * 1000 < max_ttl_ms):
        longest = "unlimited" if max_ttl_ms is None else f"{max_ttl_ms / 1000:g} s"
        return [Warning(f"JOB_RETENTION ({retention} s) is shorter than the longest task ttl ({longest}): the "
                        "cleanup deletes tasks that clients may still ask for.",
                        hint="Keep JOB_RETENTION >= TASK_MAX_TTL_MS / 1000, or set JOB_RETENTION to None.",
                        id="mcp_transport.W005")]
    return []


def _process_local_warnings(store):
    messages = []
    if store in PROCESS_LOCAL_STORES:
        messages.append(Warning(
            f"EVENT_STORE {store} keeps events in one process, with DEBUG off: a client that resumes on "
            "another web process finds nothing to replay.",
            hint="Use mcp_transport.storage.redis.RedisEventStore (the default).", id="mcp_transport.W002"))
    layers = getattr(settings, "CHANNEL_LAYERS", {}) or {}
    for alias, layer in layers.items():
        if layer.get("BACKEND") in PROCESS_LOCAL_LAYERS:
            messages.append(Warning(
                f"CHANNEL_LAYERS['{alias}'] is process-local, with DEBUG off: group messages never reach "
                "consumers in the other processes.",
                hint="Use channels_redis.core.RedisChannelLayer.", id="mcp_transport.W002"))
    return messages


def _background_tools():
    from .registry import registry

    return sorted(name for name, spec in registry.tools.items() if spec.background)


def _background_errors(store):
    names = ", ".join(_background_tools())
    messages = []
    if store in PROCESS_LOCAL_STORES:
        messages.append(Error(
            f"Background tools ({names}) run in Celery workers, but EVENT_STORE {store} keeps events in one "
            "process: their progress and results would never reach the clients.",
            hint="Use mcp_transport.storage.redis.RedisEventStore (the default).", id="mcp_transport.E006"))
    if not _celery_broker():
        messages.append(Error(
            f"Background tools ({names}) need a Celery broker, and none is configured.",
            hint="Set CELERY_BROKER_URL (with the Celery app of Celery's Django recipe).", id="mcp_transport.E007"))
    return messages


def _celery_broker():
    from celery import current_app

    return current_app.conf.broker_url or getattr(settings, "CELERY_BROKER_URL", None)
