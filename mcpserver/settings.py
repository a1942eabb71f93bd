"""Settings for the example project that serves `mcp_transport` at /mcp.

Everything comes from the environment so that the same code runs under `make run`, `make test`
and CI:

- ``REDIS_URL``: Redis for sessions, events, the cache and the Celery broker
  (``make run``/``make test`` start an embedded one when it is unset): ``redis://``, a Sentinel set
  (``redis+sentinel://HOST:PORT,HOST:PORT/MASTER/DB``) or a Redis Cluster
  (``redis+cluster://HOST:PORT,HOST:PORT``, with ``CELERY_BROKER_URL`` set: Celery cannot use a
  Cluster); ``CELERY_BROKER_URL`` gives the broker another URL.
- ``DATABASE_URL``: any URL dj-database-url understands; SQLite in the project folder otherwise;
  ``DJANGO_CONN_MAX_AGE`` (seconds a connection is reused, 60).
- ``DJANGO_DEBUG``, ``DJANGO_SECRET_KEY`` (or ``DJANGO_SECRET_KEY_FILE``, a file holding it; one of
  them is required unless ``DJANGO_DEBUG=1``), ``DJANGO_ALLOWED_HOSTS`` (comma separated),
  ``DJANGO_HTTPS`` (``1`` behind an HTTPS proxy: secure cookies, HSTS, HTTP -> HTTPS redirect),
  ``DJANGO_CSRF_TRUSTED_ORIGINS`` (comma separated, for the admin behind a proxy),
  ``DJANGO_LOGIN_FAILURE_LIMIT`` and ``DJANGO_LOGIN_COOLOFF_MINUTES`` (admin login throttling),
  ``MCP_ALLOWED_ORIGINS`` (comma separated, added to the loopback origins),
  ``MCP_SESSION_IDLE_TIMEOUT`` (seconds), ``MCP_KEY_PREFIX`` (Redis keys), ``MCP_TRUSTED_PROXIES``
  (comma separated: front proxies whose X-Forwarded-For names the client),
  ``MCP_MAX_SESSIONS_PER_ADDRESS``, ``MCP_AUTH_FAILURES_PER_ADDRESS`` (failed token lookups per
  client network a minute), ``MCP_RATE_LIMIT`` (tool calls per caller, e.g. ``20/m``),
  ``MCP_REQUEST_RATE_LIMIT`` (requests per caller, ``1200/m`` by default) and
  ``MCP_SESSION_OPEN_RATE`` (sessions opened per address, ``60/m`` by default; ``off`` for either: none),
  ``MCP_METRICS_TOKEN`` (/metrics for this bearer token instead of staff users),
  ``MCP_TOOL_DISCOVERY`` (``search``: a small tools/list and search_tools, docs/discovery.md),
  ``MCP_CLEANUP_INTERVAL`` (seconds), and
  ``MCP_TRANSPORT_JSON`` (any other MCP_TRANSPORT keys, as a JSON object), ``LOG_LEVEL``,
  ``MCP_LOG_LEVEL`` and ``LOG_FORMAT`` (``json`` for one JSON object per line).
- ``MCP_AUTH=on``: the endpoint is an OAuth 2.1 resource server (every request needs a bearer
  token: a static token from ``manage.py mcp_tokens create`` or a django-oauth-toolkit access
  token); off by default, so local use and the conformance runs need none.
- ``EXAMPLE_COUNTERS_URL``: the plain Redis of the example tool ``count_visit`` (REDIS_URL's by
  default, when that is a plain Redis URL).
"""
import json
import os
from datetime import timedelta
from pathlib import Path

import dj_database_url
from corsheaders.defaults import default_headers
from django.core.exceptions import ImproperlyConfigured

from mcp_transport.connections import parse_redis_url
from mcp_transport.cors import MCP_EXPOSED_HEADERS, MCP_REQUEST_HEADERS

BASE_DIR = Path(__file__).resolve().parent.parent


def _env_list(name):
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


def _secret_key(debug):
    """The key signs admin sessions and password reset links: a known one lets anyone forge
    them. So without one the project refuses to start, except in DEBUG (`make run` and the test
    suite make a random one)."""
    key = os.environ.get("DJANGO_SECRET_KEY")
    if not key and os.environ.get("DJANGO_SECRET_KEY_FILE"):
        key = Path(os.environ["DJANGO_SECRET_KEY_FILE"]).read_text().strip()
    if key:
        return key
    if debug:
        return "django-insecure-development-key-for-debug-only"
    raise ImproperlyConfigured(
        "DJANGO_SECRET_KEY is not set: set it (or DJANGO_SECRET_KEY_FILE, a file holding it) to a long "
        "random string, e.g. python -c 'import secrets; print(secrets.token_urlsafe(50))', or set "
        "DJANGO_DEBUG=1 for local development.")


DEBUG = os.environ.get("DJANGO_DEBUG", "0") == "1"
SECRET_KEY = _secret_key(DEBUG)
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]", *_env_list("DJANGO_ALLOWED_HOSTS")]
CSRF_TRUSTED_ORIGINS = _env_list("DJANGO_CSRF_TRUSTED_ORIGINS")

if os.environ.get("DJANGO_HTTPS") == "1":
    # Served behind an HTTPS proxy (which must set X-Forwarded-Proto): what `manage.py check
    # --deploy` asks for. The MCP endpoint is a Channels consumer; these cover the admin's pages.
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = True
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_HSTS_SECONDS = int(os.environ.get("DJANGO_HSTS_SECONDS", str(365 * 24 * 3600)))
    SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_PRELOAD = os.environ.get("DJANGO_HSTS_PRELOAD", "1") == "1"

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    # Admin login throttling (django-axes): AxesMiddleware, AUTHENTICATION_BACKENDS, AXES_* below.
    "axes",
    "oauth2_provider",
    "corsheaders",
    "mcp_transport",
    "tools",
    # The example models exposed as tools and resources (docs/models.md).
    "tools.library",
]

MIDDLEWARE = [
    # First: /healthz and /readyz answer a kubelet that names the pod's IP address in Host and
    # speaks plain HTTP, before the host check and the HTTPS redirect below see them.
    "mcp_transport.probes.ProbesMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Before CommonMiddleware, as django-cors-headers requires; /mcp has the same logic (cors.py).
    "corsheaders.middleware.CorsMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes requires: it turns a locked-out login into its 429 response.
    "axes.middleware.AxesMiddleware",
]

# django-axes checks every login against its failure records before the password is tried.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
# DJANGO_LOGIN_FAILURE_LIMIT failed logins for one username from one address lock that pair out
# for DJANGO_LOGIN_COOLOFF_MINUTES (429); a success resets the count. By the pair, not by the
# username alone, so that nobody can lock an administrator out from elsewhere by guessing.
AXES_FAILURE_LIMIT = int(os.environ.get("DJANGO_LOGIN_FAILURE_LIMIT", "5"))
AXES_COOLOFF_TIME = timedelta(minutes=float(os.environ.get("DJANGO_LOGIN_COOLOFF_MINUTES", "15")))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True

# django-oauth-toolkit: its access tokens are accepted when MCP_AUTH=on (OAuthToolkitValidator),
# with RFC 9700's behaviour (hashed tokens at rest, PKCE required, no implicit or password grant,
# no tokens in query strings, refresh token replay detection).
OAUTH2_PROVIDER = {
    "SCOPES": {"mcp": "Use this server's MCP tools"},
    "DEFAULT_SCOPES": ["mcp"],
    "PKCE_REQUIRED": True,
    "REFRESH_TOKEN_REUSE_PROTECTION": True,
    **{f"COMPLIANT_BCP_RFC9700_{gate}": True for gate in (
        "IMPLICIT_GRANT", "PASSWORD_GRANT", "PKCE_METHOD", "ACCESS_TOKEN_TRANSPORT", "AUTHZ_RESPONSE_ISS",
        "TOKEN_STORAGE", "REFRESH_TOKEN", "REDIRECT_URI_MATCHING", "PKCE_REQUIRED")},
    # The project is its own authorization server (mcp_transport.oauth.urls): MCP clients
    # register themselves (RFC 7591; mcp_transport.oauth.views bounds it and allows only public
    # clients) or name an https client ID metadata document, then send the user here to sign in.
    "DCR_ENABLED": True,
    "DCR_REGISTRATION_PERMISSION_CLASSES": ("oauth2_provider.dcr.AllowAllDCRPermission",),
    "CIMD_ENABLED": True,
    # A fetched client ID metadata document passes the registration policy too.
    "CIMD_METADATA_FETCHER": "mcp_transport.oauth.views.PolicyMetadataFetcher",
    # What the RFC 8414 metadata advertises: what this server accepts.
    "OAUTH2_RESPONSE_TYPES_SUPPORTED": ["code"],
    "OAUTH2_GRANT_TYPES_SUPPORTED": ["authorization_code", "refresh_token", "client_credentials"],
    "OAUTH2_TOKEN_ENDPOINT_AUTH_METHODS_SUPPORTED": ["none", "client_secret_basic", "client_secret_post"],
}
# MCP clients on the user's machine receive the authorization code on a loopback http://
# redirect URI (RFC 8252 §7.3), which this warning would forbid.
SILENCED_SYSTEM_CHECKS = ["oauth2_provider.W008"]

# Browser MCP clients (django-cors-headers): the origins are MCP_TRANSPORT["ALLOWED_ORIGINS"]
# (and loopback), asked through mcp_transport.cors, for /mcp and the OAuth endpoints only; no
# origin is allowed by URL or by a list of its own here.
CORS_URLS_REGEX = r"^$"
CORS_ALLOW_HEADERS = (*default_headers, *MCP_REQUEST_HEADERS)
CORS_EXPOSE_HEADERS = MCP_EXPOSED_HEADERS

ROOT_URLCONF = "mcpserver.urls"
ASGI_APPLICATION = "mcpserver.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.config(
        default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}",
        # DJANGO_CONN_MAX_AGE: seconds a process keeps a database connection between uses (the
        # test suite's many idle servers use 0, so that they hold none of PostgreSQL's 100).
        conn_max_age=int(os.environ.get("DJANGO_CONN_MAX_AGE", "60")),
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # libpq waits for a new connection without end: a database that drops packets (a network
    # partition, a failover in progress) would hold every thread that connects, for minutes.
    DATABASES["default"].setdefault("OPTIONS", {}).setdefault("connect_timeout", 5)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several processes (daphne, celery, tests) share one file: wait for the write lock.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
    # ... from the start of a transaction: one that reads and then writes (a model toolset's
    # create, validated first) otherwise fails at once with "database is locked" when another
    # process writes meanwhile, instead of waiting.
    DATABASES["default"]["OPTIONS"]["transaction_mode"] = "IMMEDIATE"
    # Write-ahead logging: readers (the admin, a replay) no longer block the writer or wait for
    # it, and a commit appends to the log without a sync of the database file each time (the
    # event and session rows are written in batches from two threads; issue 19).
    DATABASES["default"]["OPTIONS"]["init_command"] = "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;"
    DATABASES["default"]["CONN_MAX_AGE"] = 0

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")
# redis+sentinel://H:P,H:P,H:P/MASTER/DB or redis+cluster://H:P,H:P,... (docs/deployment.md,
# "Redis at scale"): the app, the cache and the broker each take it in their own form.
REDIS_TARGET = parse_redis_url(REDIS_URL)

if REDIS_TARGET.kind == "sentinel":
    # django-redis's Sentinel client: LOCATION names the master, the Sentinels are OPTIONS.
    DJANGO_REDIS_CONNECTION_FACTORY = "mcpserver.cache.RidingSentinelConnectionFactory"
    _CACHE = {"BACKEND": "django_redis.cache.RedisCache",
              "LOCATION": f"redis://{REDIS_TARGET.master}/{REDIS_TARGET.db}",
              "OPTIONS": {"CLIENT_CLASS": "django_redis.client.SentinelClient",
                          "SENTINELS": list(REDIS_TARGET.nodes), "SENTINEL_KWARGS": REDIS_TARGET.sentinel_options,
                          "CONNECTION_POOL_KWARGS": REDIS_TARGET.options}}
elif REDIS_TARGET.kind == "cluster":
    # django-redis has no Cluster client: Django's RedisCache on a RedisCluster (mcpserver/cache.py).
    _CACHE = {"BACKEND": "mcpserver.cache.RedisClusterCache", "LOCATION": REDIS_URL}
else:
    # The cache's connections ride out an outage as the app's do (mcpserver/cache.py).
    DJANGO_REDIS_CONNECTION_FACTORY = "mcpserver.cache.RidingConnectionFactory"
    _CACHE = {"BACKEND": "django_redis.cache.RedisCache", "LOCATION": REDIS_URL,
              "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"}}
CACHES = {"default": {**_CACHE, "KEY_PREFIX": "mcpserver"}}
# The example tool count_visit's Redis (tools/mcp_tools/shared_clients.py): a plain Redis URL, by
# default REDIS_URL's when that is one.
EXAMPLE_COUNTERS_URL = os.environ.get("EXAMPLE_COUNTERS_URL", REDIS_URL if REDIS_TARGET.kind == "single" else "")


def _broker_url(target):
    """The Celery broker: CELERY_BROKER_URL, else the Redis of REDIS_URL (kombu's Sentinel
    transport for a Sentinel set). Celery has no Redis Cluster transport (celery #2852): with a
    Cluster, CELERY_BROKER_URL must name another broker (RabbitMQ: amqp://...), and `manage.py
    check` says so (mcp_transport.E010)."""
    if os.environ.get("CELERY_BROKER_URL"):
        return os.environ["CELERY_BROKER_URL"]
    if target.kind == "sentinel":
        auth = f":{target.options['password']}@" if target.options.get("password") else ""
        return ";".join(f"sentinel://{auth}{host}:{port}/{target.db}" for host, port in target.nodes)
    return None if target.kind == "cluster" else REDIS_URL


CELERY_BROKER_URL = _broker_url(REDIS_TARGET)
if REDIS_TARGET.kind == "sentinel" and not os.environ.get("CELERY_BROKER_URL"):
    CELERY_BROKER_TRANSPORT_OPTIONS = {"master_name": REDIS_TARGET.master,
                                       "sentinel_kwargs": REDIS_TARGET.sentinel_options}
CELERY_TASK_ACKS_LATE = False
# Background tools go to this queue (a test run uses its own, so no other worker takes its jobs).
CELERY_TASK_DEFAULT_QUEUE = os.environ.get("CELERY_QUEUE", "celery")
# One job at a time per pool process: a long job never sits behind another in a prefetch buffer.
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_WORKER_HIJACK_ROOT_LOGGER = False
# The retention cleanup (mcp_transport/operations.py), every MCP_CLEANUP_INTERVAL seconds. `make
# run` runs beat inside the worker (-B); a deployment runs one `celery -A mcpserver beat`.
CELERY_BEAT_SCHEDULE = {
    "mcp-transport-cleanup": {"task": "mcp_transport.cleanup",
                              "schedule": float(os.environ.get("MCP_CLEANUP_INTERVAL", "300"))},
}

MCP_TRANSPORT = {
    "ALLOWED_ORIGINS": _env_list("MCP_ALLOWED_ORIGINS"),
    "KEY_PREFIX": os.environ.get("MCP_KEY_PREFIX", "mcp"),
    "SESSION_IDLE_TIMEOUT": int(os.environ.get("MCP_SESSION_IDLE_TIMEOUT", "1800")),
    "TRUSTED_PROXIES": _env_list("MCP_TRUSTED_PROXIES"),
    # Who the server is (serverInfo, and the Server Card at /mcp/server-card: docs/server-card.md).
    "SERVER_NAME": "com.example/django-mcp-transport-example",
    "SERVER_DESCRIPTION": "The example project of django-mcp-transport: echo, progress, background and book tools.",
    # /metrics: for a bearer token when MCP_METRICS_TOKEN is set, otherwise for staff users.
    "METRICS_ACCESS": "token" if os.environ.get("MCP_METRICS_TOKEN") else "staff",
    "METRICS_TOKEN": os.environ.get("MCP_METRICS_TOKEN") or None,
    # Bearer tokens on every request (static tokens, then django-oauth-toolkit's).
    "AUTH": os.environ.get("MCP_AUTH", "off") == "on",
    # Experimental: tasks/stream (SEP-2694, a draft), a task's events resumable on any process.
    "TASK_STREAMS": True,
}
if REDIS_TARGET.kind != "single":  # the cache's LOCATION is not the app's URL then
    MCP_TRANSPORT["REDIS_URL"] = REDIS_URL
if os.environ.get("MCP_MAX_SESSIONS_PER_ADDRESS"):
    MCP_TRANSPORT["MAX_SESSIONS_PER_ADDRESS"] = int(os.environ["MCP_MAX_SESSIONS_PER_ADDRESS"])
if os.environ.get("MCP_AUTH_FAILURES_PER_ADDRESS"):
    MCP_TRANSPORT["AUTH_FAILURES_PER_ADDRESS"] = int(os.environ["MCP_AUTH_FAILURES_PER_ADDRESS"])
if os.environ.get("MCP_TOOL_DISCOVERY"):  # "search": a small tools/list and search_tools (docs/discovery.md)
    MCP_TRANSPORT["TOOL_DISCOVERY"] = os.environ["MCP_TOOL_DISCOVERY"]
if os.environ.get("MCP_RATE_LIMIT"):  # "20/m": each caller's tools/call requests per window
    MCP_TRANSPORT["RATE_LIMIT"] = os.environ["MCP_RATE_LIMIT"]
for _name in ("REQUEST_RATE_LIMIT", "SESSION_OPEN_RATE"):  # "600/m"; "off": no limit (the test suite's)
    if os.environ.get(f"MCP_{_name}"):
        MCP_TRANSPORT[_name] = None if os.environ[f"MCP_{_name}"] == "off" else os.environ[f"MCP_{_name}"]
# Any other key, as JSON (deployments and tests): MCP_TRANSPORT_JSON='{"SSE_RETRY_MS": null}'
MCP_TRANSPORT.update(json.loads(os.environ.get("MCP_TRANSPORT_JSON") or "{}"))

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "staticfiles"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Every record carries the MCP session and request ids (mcp_transport/logs.py); LOG_FORMAT=json
# writes one JSON object per line instead of text.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"mcp_ids": {"()": "mcp_transport.logs.ContextFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(mcp_session_id)s %(mcp_request_id)s %(trace_id)s %(span_id)s] %(message)s"},
        "json": {"()": "mcp_transport.logs.JsonFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["mcp_ids"],
                             "formatter": "json" if os.environ.get("LOG_FORMAT") == "json" else "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    "loggers": {"mcp_transport": {"level": os.environ.get("MCP_LOG_LEVEL", "INFO")}},
}

# Tracing (docs/operations.md, "Tracing"): with OTEL_SPANS_FILE set, this process (daphne, the
# Celery worker and its pool) records its spans with the OpenTelemetry SDK and appends them to
# that file, one JSON object per line (the integration tests read it). A deployment configures
# its own exporter here the same way (OTLP, BatchSpanProcessor).
if os.environ.get("OTEL_SPANS_FILE"):
    from opentelemetry import trace
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor

    _spans = open(os.environ["OTEL_SPANS_FILE"], "a", buffering=1)  # each span one append
    _provider = TracerProvider(resource=Resource.create({"service.name": "mcpserver"}))
    _provider.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(
        out=_spans, formatter=lambda span: span.to_json(indent=None) + "\n")))
    trace.set_tracer_provider(_provider)
