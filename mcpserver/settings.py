"""Settings for the example project that serves `mcp_transport` at /mcp.

Everything comes from the environment so that the same code runs under `make run`, `make test`
and CI:

- ``REDIS_URL``: Redis for sessions, events, the cache and the Celery broker
  (``make run``/``make test`` start an embedded one when it is unset); ``CELERY_BROKER_URL``
  gives the broker another URL.
- ``DATABASE_URL``: any URL dj-database-url understands; SQLite in the project folder otherwise.
- ``DJANGO_DEBUG``, ``DJANGO_SECRET_KEY``, ``DJANGO_ALLOWED_HOSTS`` (comma separated),
  ``MCP_ALLOWED_ORIGINS`` (comma separated, added to the loopback origins),
  ``MCP_SESSION_IDLE_TIMEOUT`` (seconds), ``MCP_KEY_PREFIX`` (Redis keys), ``MCP_METRICS_TOKEN``
  (/metrics for this bearer token instead of staff users), ``MCP_CLEANUP_INTERVAL`` (seconds), and
  ``MCP_TRANSPORT_JSON`` (any other MCP_TRANSPORT keys, as a JSON object), ``LOG_LEVEL``,
  ``MCP_LOG_LEVEL`` and ``LOG_FORMAT`` (``json`` for one JSON object per line).
"""
import json
import os
from pathlib import Path

import dj_database_url

BASE_DIR = Path(__file__).resolve().parent.parent


def _env_list(name):
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


DEBUG = os.environ.get("DJANGO_DEBUG", "0") == "1"
# A development key; deployments set DJANGO_SECRET_KEY.
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "django-insecure-development-key-change-me")
ALLOWED_HOSTS = ["127.0.0.1", "localhost", "[::1]", *_env_list("DJANGO_ALLOWED_HOSTS")]

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "mcp_transport",
    "tools",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

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
        default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}", conn_max_age=60
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Several processes (daphne, celery, tests) share one file: wait for the write lock.
    DATABASES["default"].setdefault("OPTIONS", {})["timeout"] = 20
    DATABASES["default"]["CONN_MAX_AGE"] = 0

REDIS_URL = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0")

CACHES = {
    "default": {
        "BACKEND": "django_redis.cache.RedisCache",
        "LOCATION": REDIS_URL,
        "OPTIONS": {"CLIENT_CLASS": "django_redis.client.DefaultClient"},
        "KEY_PREFIX": "mcpserver",
    }
}

CELERY_BROKER_URL = os.environ.get("CELERY_BROKER_URL") or REDIS_URL
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
    "SERVER_NAME": "django-mcp-transport-example",
    # /metrics: for a bearer token when MCP_METRICS_TOKEN is set, otherwise for staff users.
    "METRICS_ACCESS": "token" if os.environ.get("MCP_METRICS_TOKEN") else "staff",
    "METRICS_TOKEN": os.environ.get("MCP_METRICS_TOKEN") or None,
}
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
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(mcp_session_id)s %(mcp_request_id)s] %(message)s"},
        "json": {"()": "mcp_transport.logs.JsonFormatter"},
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["mcp_ids"],
                             "formatter": "json" if os.environ.get("LOG_FORMAT") == "json" else "plain"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    "loggers": {"mcp_transport": {"level": os.environ.get("MCP_LOG_LEVEL", "INFO")}},
}
