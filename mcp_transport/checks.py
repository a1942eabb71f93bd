"""System checks for settings that cannot work (``manage.py check``; also run by migrate).

- mcp_transport.E001: MCP_TRANSPORT has unknown keys.
- mcp_transport.E002: EVENT_STORE cannot be built (BACKEND not importable, or OPTIONS refused).
- mcp_transport.E003: Redis does not answer PING (sessions, events and control live there).
- mcp_transport.E004: a setting has a value of the wrong type or range.
- mcp_transport.E005: METRICS_ACCESS is "token" without a METRICS_TOKEN.
- mcp_transport.E006: background tools with a process-local event store (workers are other
  processes: their events would never reach the web processes).
- mcp_transport.E007: background tools without a Celery broker.
- mcp_transport.E008: a Celery worker answers but does not know the task mcp_transport.run_job
  (it discards background calls). Asked of the workers, so only on request:
  ``manage.py check --deploy --tag mcp_transport_workers``.
- mcp_transport.W001: ALLOWED_ORIGINS is empty with DEBUG off (only loopback browsers can call).
- mcp_transport.W002: a process-local event store or channel layer with DEBUG off (a deployment
  runs several web processes, and a client's next request may land on any of them).
- mcp_transport.W003: EVENT_RETENTION shorter than STREAM_TTL (the database, Redis's fallback,
  would forget events that Redis still replays).
- mcp_transport.W004: polling mode without SSE_RETRY_MS (clients get no pace for their polls).
- mcp_transport.W005: JOB_RETENTION shorter than the longest task ttl (TASK_MAX_TTL_MS): the
  cleanup would delete tasks that clients may still ask for.
- mcp_transport.W006: no Celery worker answered a ping, or none consumes the queue of a
  background tool (with E008, only on request).
- mcp_transport.W007: AUTH off with DEBUG off: anyone who reaches the endpoint may call every tool.
- mcp_transport.W008: "offline_access" among AUTH_SCOPES or AUTH_REQUIRED_SCOPES ("MCP Servers
  SHOULD NOT include offline_access in WWW-Authenticate scope or ... scopes_supported").
- mcp_transport.E010: the Redis URL names one node of a Redis Cluster as a single server (every
  command on another node's key would fail with MOVED): name the Cluster (redis+cluster://).
- mcp_transport.E011: Redis is a Cluster and Celery's broker is on it, or there is no other broker
  (kombu has no Cluster transport).
- mcp_transport.E012: a django-redis cache on a Redis Cluster (django-redis has no Cluster client).
- mcp_transport.E009: AUTH_VALIDATORS cannot be built (BACKEND not importable, OPTIONS refused).
- mcp_transport.W009: the app's authorization server takes client ID metadata documents through
  a fetcher that skips the registration policy (not ``PolicyMetadataFetcher``).
- mcp_transport.W011: a persistent CONN_MAX_AGE while nothing closes the connections of Django's
  requests at their end (under ASGI each runs in a thread of its own, and its connection would
  stay open until garbage collection: transports/serving.py).
- mcp_transport.W010 (``check --deploy``): SERVER_NAME is not a reverse-DNS name or SERVER_DESCRIPTION
  is unset: the endpoint's Server Card (``<endpoint>/server-card``) answers 404.
"""
from numbers import Real

from django.conf import settings
from django.core.checks import Error, Tags, Warning, register
from django.core.exceptions import ImproperlyConfigured
from redis.backoff import NoBackoff

from .conf import get_config, redis_url
from .connections import CLUSTER_SCHEME, redis_target, retry_policy, sync_client
from .methods import apps as mcp_apps
from .protocol import http, server_card
from .state import rates

#: Keys that must be numbers > 0 (None allowed where the value means "never" or "off").
POSITIVE = ("SESSION_IDLE_TIMEOUT", "MAX_REQUEST_BYTES", "KEEPALIVE_SECONDS", "HEARTBEAT_SECONDS",
            "CLIENT_REQUEST_TIMEOUT", "PAGE_SIZE", "REDIS_MAX_CONNECTIONS", "REDIS_OUTAGE_TOLERANCE",
            "DATABASE_OUTAGE_TOLERANCE", "READINESS_CHECK_SECONDS", "DASHBOARD_SAMPLE_SECONDS",
            "DASHBOARD_SAMPLES", "TASK_DEFAULT_TTL_MS", "TASK_POLL_INTERVAL_MS", "AUTH_CACHE_SECONDS",
            "AUTH_CACHE_SIZE", "MAX_HEADER_BYTES", "MAX_HEADERS", "REQUEST_RECEIVE_SECONDS", "IDLE_CONNECTION_SECONDS",
            "MAX_SESSIONS_PER_ADDRESS", "MAX_CALLS_PER_SESSION", "MAX_CALLS_PER_CALLER", "MAX_EVENT_BYTES",
            "MAX_CLIENT_INFO_BYTES", "MAX_SUBSCRIPTIONS_PER_SESSION", "MAX_URI_BYTES",
            "MAX_JSON_DEPTH", "MAX_ID_BYTES", "REPLAY_WINDOW_SECONDS", "MAX_REQUEST_STATE_BYTES",
            "SYNC_TOOL_THREADS", "SYNC_HANDLER_THREADS", "SYNC_THREADS_PER_SESSION", "SYNC_THREADS_PER_CALLER",
            "SEARCH_MAX_TERMS", "SYNC_WAITING_THREADS",
            "SYNC_WAITING_PER_SESSION", "JOB_HELD_ASK_TIMEOUT", "MAX_LISTENS_PER_CALLER",
            "SYNC_WAITING_PER_CALLER", "AUTH_FAILURE_WINDOW")
#: Keys that may be None, else numbers >= 0.
OPTIONAL_NON_NEGATIVE = ("SSE_RETRY_MS", "POLL_AFTER_SECONDS", "CLOSED_SESSION_RETENTION", "EVENT_RETENTION",
                         "JOB_RETENTION", "PROGRESS_HEARTBEAT_SECONDS", "TASK_MAX_TTL_MS",
                         "JOB_QUEUE_TIMEOUT", "TOOL_MAX_SECONDS", "STATEMENT_TIMEOUT_SECONDS", "CLEANUP_INTERVAL", "CALL_LOG_RETENTION", "SESSION_MAX_BYTES",
                         "AUTH_REVOCABLE_MEMORY_SECONDS", "JOB_HELD_WAITS",
                         "REPLAY_BYTES_PER_CALLER", "JOB_SOFT_TIME_LIMIT", "JOB_TIME_LIMIT",
                         "JOB_CANCEL_GRACE_SECONDS", "CLIENT_GONE_SECONDS",
                         "CALL_LOG_MAX_PER_SECOND", "CALLER_COUNT_MEMORY_SECONDS",
                         "PERMISSION_CACHE_SECONDS", "AUTH_FAILURE_CACHE_SECONDS", "AUTH_FAILURES_PER_ADDRESS")
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
    if _config() is None:
        return []
    hint = (f"Sessions, events and cross-process control need Redis: start it, or correct {_redis_setting()}. "
            "A URL is redis://, redis+sentinel://HOST:PORT,.../MASTER/DB or redis+cluster://HOST:PORT,...")
    try:
        target = redis_target()
        client = sync_client(target, socket_connect_timeout=2, socket_timeout=2,
                             retry=retry_policy(NoBackoff(), 0, asynchronous=False))
        try:
            client.ping()
            cluster_node = target.kind == "single" and client.info("cluster").get("cluster_enabled") == 1
        finally:
            client.close()
    except ImproperlyConfigured as exc:
        return [Error(f"The Redis settings cannot work: {exc}", hint=hint, id="mcp_transport.E003")]
    except Exception as exc:
        return [Error(f"Redis does not answer: {exc}", hint=hint, id="mcp_transport.E003")]
    if cluster_node:
        return [Error(f"{redis_url()} is a node of a Redis Cluster, named as a single server: every command on "
                      "a key of another node would fail with MOVED.",
                      hint="Name the Cluster: redis+cluster://HOST:PORT,HOST:PORT,... (docs/deployment.md, "
                           "'Redis at scale').", id="mcp_transport.E010")]
    return _cluster_neighbours_check(target)


def _cluster_neighbours_check(target):
    """What cannot share a Redis Cluster with the app: Celery's broker, django-redis's cache."""
    if target.kind != "cluster":
        return []
    messages = []
    broker = str(_celery_broker() or "")
    if _background_tools() and (not broker or broker.startswith(("redis", "rediss", "sentinel"))
                                and _names_cluster_node(broker, target)):
        messages.append(Error(
            "Celery cannot use a Redis Cluster as its broker (kombu has no Cluster transport), and background "
            "tools need one." if broker else
            "Redis is a Redis Cluster, and no other Celery broker is configured: background tools need one "
            "(Celery cannot use a Cluster).",
            hint="Set CELERY_BROKER_URL to RabbitMQ (amqp://...), a plain Redis or a Sentinel set.",
            id="mcp_transport.E011"))
    for alias, cache in settings.CACHES.items():
        if cache.get("BACKEND", "").startswith("django_redis.") and "cluster" in str(cache.get("LOCATION", "")):
            messages.append(Error(
                f"CACHES[{alias!r}] is a django-redis cache on a Redis Cluster: django-redis has no Cluster client.",
                hint="Use Django's RedisCache on a RedisCluster (the example project's mcpserver.cache."
                     "RedisClusterCache), or another cache.", id="mcp_transport.E012"))
    return messages


def _redis_kind():
    try:
        return redis_target().kind
    except ImproperlyConfigured:  # E003 says why
        return None


def _names_cluster_node(url, target):
    if url.startswith(CLUSTER_SCHEME):
        return True
    return any(f"{host}:{port}" in url for host, port in target.nodes)


def _redis_setting() -> str:
    """The setting the Redis URL comes from: MCP_TRANSPORT['REDIS_URL'], or when that is unset the
    LOCATION of the cache it names."""
    config = get_config()
    if config.get("REDIS"):
        return "MCP_TRANSPORT['REDIS']"
    if config["REDIS_URL"]:
        return "MCP_TRANSPORT['REDIS_URL']"
    return f"CACHES[{config['CACHE_ALIAS']!r}]['LOCATION'] (or set MCP_TRANSPORT['REDIS_URL'])"


@register(Tags.templates)
def apps_check(app_configs, **kwargs):
    """MCP Apps (methods/apps.py): a view's template and static files, its _meta.ui, the views tools name."""
    return [Error(problem, hint="See docs/apps.md.", id="mcp_transport.E013") for problem in mcp_apps.problems()]


@register(Tags.compatibility)
def values_check(app_configs, **kwargs):
    config = _config()
    if config is None:
        return []
    errors = [_value_error(name, config[name], "a number > 0") for name in POSITIVE
              if not _number(config[name]) or config[name] <= 0]
    errors += [_value_error(name, config[name], "None or a number >= 0") for name in OPTIONAL_NON_NEGATIVE
               if config[name] is not None and (not _number(config[name]) or config[name] < 0)]
    if not http.valid_networks(config["TRUSTED_PROXIES"]):
        errors.append(_value_error("TRUSTED_PROXIES", config["TRUSTED_PROXIES"],
                                   "a list of IP addresses or networks (\"10.0.0.0/8\")"))
    if not _number(config["CALL_LOG_SAMPLE"]) or not 0 <= config["CALL_LOG_SAMPLE"] <= 1:
        errors.append(_value_error("CALL_LOG_SAMPLE", config["CALL_LOG_SAMPLE"], "a number from 0 to 1"))
    kept = config["CALL_LOG_ARGUMENTS_KEPT"]
    if isinstance(kept, str) or not isinstance(kept, (list, tuple)) or not all(isinstance(n, str) for n in kept):
        errors.append(_value_error("CALL_LOG_ARGUMENTS_KEPT", kept, "a list of argument names"))
    errors += _job_share_errors(config)
    errors += _server_info_errors(config)
    for name in ("RATE_LIMIT", "REQUEST_RATE_LIMIT", "SESSION_OPEN_RATE"):
        if config[name] is not None:
            try:
                rates.parse(config[name])
            except ValueError:
                errors.append(_value_error(name, config[name], 'None or "<calls>/<period>" ("20/m")'))
    if config["METRICS_ACCESS"] not in METRICS_ACCESS:
        errors.append(_value_error("METRICS_ACCESS", config["METRICS_ACCESS"], " or ".join(map(repr, METRICS_ACCESS))))
    elif config["METRICS_ACCESS"] == "token" and not config["METRICS_TOKEN"]:
        errors.append(Error("METRICS_ACCESS is 'token' but METRICS_TOKEN is empty: nobody could read the metrics.",
                            hint="Set MCP_TRANSPORT['METRICS_TOKEN'] to a long random string.",
                            id="mcp_transport.E005"))
    return errors


def _job_share_errors(config) -> list:
    """MAX_RUNNING_JOBS_PER_CALLER: None or a whole number >= 1 (0 would never start a job), and
    the same for each tool of MAX_RUNNING_JOBS_PER_CALLER_BY_TOOL."""
    def whole(value):
        return isinstance(value, int) and not isinstance(value, bool) and value >= 1

    errors, share = [], config["MAX_RUNNING_JOBS_PER_CALLER"]
    if share is not None and not whole(share):
        errors.append(_value_error("MAX_RUNNING_JOBS_PER_CALLER", share, "None or a whole number >= 1"))
    by_tool = config["MAX_RUNNING_JOBS_PER_CALLER_BY_TOOL"]
    if not isinstance(by_tool, dict) or not all(isinstance(name, str) and whole(n) for name, n in by_tool.items()):
        errors.append(_value_error("MAX_RUNNING_JOBS_PER_CALLER_BY_TOOL", by_tool,
                                   "a dict of tool names to whole numbers >= 1"))
    return errors


def _server_info_errors(config) -> list:
    """What serverInfo and the Server Card say (protocol/server_card.py has each field's rule)."""
    version, icons = config["SERVER_VERSION"], config["SERVER_ICONS"]
    problems = [server_card.text_problem("SERVER_TITLE", config["SERVER_TITLE"]),
                server_card.text_problem("SERVER_DESCRIPTION", config["SERVER_DESCRIPTION"]),
                server_card.url_problem("SERVER_WEBSITE_URL", config["SERVER_WEBSITE_URL"])]
    if not isinstance(config["SERVER_NAME"], str) or not config["SERVER_NAME"]:
        problems.append(f"SERVER_NAME must be text, not {config['SERVER_NAME']!r}")
    if version is not None and not (isinstance(version, str) and 0 < len(version) <= 255):
        problems.append(f"SERVER_VERSION must be None or up to 255 characters of text, not {version!r}")
    problems += [server_card.icon_problem(icon) for icon in icons] if isinstance(icons, (list, tuple)) else \
        [f"SERVER_ICONS must be a list of icons, not {icons!r}"]
    return [Error(f"MCP_TRANSPORT's {problem}.", id="mcp_transport.E004") for problem in problems if problem]


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


@register(Tags.compatibility, deploy=True)
def server_card_check(app_configs, **kwargs):
    """Only with ``check --deploy``: a project may have no use for a card."""
    from .methods.dispatch import server_info

    config = _config()
    if config is None or _server_info_errors(config):  # E001, E004 say what
        return []
    problem = server_card.missing(server_info())
    if problem is None:
        return []
    return [Warning(f"The Server Card at <endpoint>{server_card.SUFFIX} answers 404: MCP_TRANSPORT's {problem}.",
                    hint="Set SERVER_NAME (reverse DNS of a domain you control, 'com.example/weather') and "
                         "SERVER_DESCRIPTION (docs/server-card.md), or silence mcp_transport.W010.",
                    id="mcp_transport.W010")]


def _background_tools():
    from .methods.registry import registry

    return sorted(name for name, spec in registry.tools.items() if spec.background)


def _background_errors(store):
    names = ", ".join(_background_tools())
    messages = []
    if store in PROCESS_LOCAL_STORES:
        messages.append(Error(
            f"Background tools ({names}) run in Celery workers, but EVENT_STORE {store} keeps events in one "
            "process: their progress and results would never reach the clients.",
            hint="Use mcp_transport.storage.redis.RedisEventStore (the default).", id="mcp_transport.E006"))
    if not _celery_broker() and _redis_kind() != "cluster":  # a Cluster's own error: E011
        messages.append(Error(
            f"Background tools ({names}) need a Celery broker, and none is configured.",
            hint="Set CELERY_BROKER_URL (with the Celery app of Celery's Django recipe).", id="mcp_transport.E007"))
    return messages


def _celery_broker():
    from celery import current_app

    return current_app.conf.broker_url or getattr(settings, "CELERY_BROKER_URL", None)


#: The tag of the checks that ask the running workers (a broadcast and a wait): they run only
#: with ``check --deploy``, never on migrate or runserver, which must not wait for a broker.
WORKERS_TAG = "mcp_transport_workers"
#: Seconds the workers get to answer each broadcast.
WORKER_PING_SECONDS = 2.0
RUN_JOB = "mcp_transport.run_job"


@register(WORKERS_TAG, deploy=True)
def workers_check(app_configs, **kwargs):
    """The running workers know the app's task and consume every background tool's queue."""
    from .running.jobs.settling import worker_command

    if _config() is None or not _background_tools() or not _celery_broker():
        return []
    try:
        registered, queues = _ask_workers()
    except Exception as exc:
        return [Warning(f"The Celery broker did not answer: {exc}", id="mcp_transport.W006")]
    if not registered:
        return [Warning(f"No Celery worker answered a ping within {WORKER_PING_SECONDS:g} s: background calls will "
                        "wait for one, then fail (JOB_QUEUE_TIMEOUT).",
                        hint=f"Start one with: {worker_command()}", id="mcp_transport.W006")]
    messages = [Error(f"Celery worker {name} does not know the task {RUN_JOB}: it discards background calls.",
                      hint="Restart it with this project's code (mcp_transport in INSTALLED_APPS, Celery's Django "
                           "recipe), or give it a broker of its own.", id="mcp_transport.E008")
                for name, tasks in sorted(registered.items()) if RUN_JOB not in {t.split()[0] for t in tasks}]
    missing = sorted(_tool_queues() - {queue["name"] for answer in queues.values() for queue in answer})
    if missing:
        messages.append(Warning(f"No Celery worker consumes the queue(s) {', '.join(missing)} of background tools.",
                                hint=f"Start a worker with: {worker_command(','.join(missing))}",
                                id="mcp_transport.W006"))
    return messages


def _ask_workers():
    """{worker: [task names]} and {worker: [queues]} of the workers that answer in time."""
    from celery import current_app

    inspect = current_app.control.inspect(timeout=WORKER_PING_SECONDS)
    return inspect.registered() or {}, inspect.active_queues() or {}


def _tool_queues():
    from .running.jobs.submitting import queue_of
    from .methods.registry import registry

    return {queue_of(spec) for spec in registry.tools.values() if spec.background}


@register(Tags.security)
def auth_check(app_configs, **kwargs):
    config = _config()
    if config is None:
        return []
    if not config["AUTH"]:
        if settings.DEBUG:
            return []
        return [Warning("MCP_TRANSPORT['AUTH'] is off with DEBUG off: anyone who reaches the endpoint may call "
                        "every tool.", hint="Turn AUTH on (bearer tokens on every request), unless only trusted "
                        "clients can reach the endpoint.", id="mcp_transport.W007")]
    from . import auth

    messages = []
    try:
        auth.configured_validators.cache_clear()
        auth.configured_validators()
    except Exception as exc:
        messages.append(Error(f"MCP_TRANSPORT['AUTH_VALIDATORS'] cannot be built: {exc!r}",
                              hint="Each entry is {'BACKEND': dotted path of a TokenValidator, 'OPTIONS': {...}}.",
                              id="mcp_transport.E009"))
    if "offline_access" in {*config["AUTH_SCOPES"], *config["AUTH_REQUIRED_SCOPES"]}:
        messages.append(Warning(
            "offline_access is among AUTH_SCOPES or AUTH_REQUIRED_SCOPES.",
            hint="\"MCP Servers (Protected Resources) SHOULD NOT include offline_access in WWW-Authenticate scope "
                 "or Protected Resource Metadata scopes_supported\" (spec 2026-07-28).", id="mcp_transport.W008"))
    return messages


@register(Tags.security)
def oauth_check(app_configs, **kwargs):
    """The app's authorization server (mcp_transport.oauth.urls) with client ID metadata
    documents on must fetch them through PolicyMetadataFetcher, or a document would register a
    client that registration refuses."""
    from django.apps import apps
    from django.urls import NoReverseMatch, resolve, reverse

    if not apps.is_installed("oauth2_provider"):
        return []
    try:
        view = getattr(resolve(reverse("oauth2_provider:dcr-register")).func, "view_class", None)
    except NoReverseMatch:
        return []
    from oauth2_provider.settings import oauth2_settings

    from .oauth.views import ClientRegistrationView, PolicyMetadataFetcher

    if view is None or not issubclass(view, ClientRegistrationView) or not oauth2_settings.CIMD_ENABLED:
        return []
    if issubclass(oauth2_settings.CIMD_METADATA_FETCHER, PolicyMetadataFetcher):
        return []
    return [Warning("OAUTH2_PROVIDER['CIMD_ENABLED'] is on with a metadata fetcher that skips the registration "
                    "policy: a client ID metadata document may name any redirect URI.",
                    hint="Set OAUTH2_PROVIDER['CIMD_METADATA_FETCHER'] to "
                         "'mcp_transport.oauth.views.PolicyMetadataFetcher' (or a subclass).",
                    id="mcp_transport.W009")]


@register(Tags.compatibility)
def connections_check(app_configs, **kwargs):
    """Under ASGI (this app's only way of serving) Django runs each request's sync code in a
    thread made for that request: a persistent connection opened there is never used again,
    and stays open until a garbage collection finds it. The app closes them at the request's
    end (transports/serving.py), leaving CONN_MAX_AGE to its own bounded threads; W011 when a
    project has undone that."""
    from .transports.serving import closes_request_connections

    persistent = sorted(alias for alias, database in settings.DATABASES.items()
                        if database.get("CONN_MAX_AGE", 0) != 0)
    if not persistent or closes_request_connections():
        return []
    return [Warning(f"CONN_MAX_AGE keeps connections of {', '.join(persistent)} open, and nothing closes those of "
                    "Django's requests: under ASGI each request runs in a thread of its own, so every request "
                    "to a sync view (the admin, /o/token/, /o/register/) leaves one open until garbage "
                    "collection, and anonymous clients can take every connection of the database.",
                    hint="Keep mcp_transport.transports.serving.close_connections_after_django_requests() "
                         "connected (the app's ready() does it), or set CONN_MAX_AGE to 0.",
                    id="mcp_transport.W011")]
