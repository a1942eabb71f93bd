"""Settings for mcp_transport, read only through ``get_config()``.

Usage, in the project's settings.py::

    MCP_TRANSPORT = {
        "ALLOWED_ORIGINS": ["https://app.example.com"],
        "SESSION_IDLE_TIMEOUT": 1800,
        "SSE_RETRY_MS": 1000,          # None: no retry field at all
        "EVENT_STORE": {"BACKEND": "mcp_transport.storage.redis.RedisEventStore",
                        "OPTIONS": {"persist": "batched", "maxlen": 1000}},
    }

Unknown keys raise ``ImproperlyConfigured`` so that a typo never passes silently. The cache is
cleared when ``MCP_TRANSPORT`` changes (``override_settings`` in tests).
"""
import functools
from functools import cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

from .protocol import bounds

DEFAULTS = {
    #: Redis URL for sessions, events and doorbells; None: the LOCATION of CACHE_ALIAS.
    "REDIS_URL": None,
    #: Redis Sentinel or Cluster in structured form (connections.structured_target), instead of a
    #: redis+sentinel:// or redis+cluster:// REDIS_URL; None: the URL.
    "REDIS": None,
    #: Redis connections per process (event loop); commands wait for a free one beyond that.
    "REDIS_MAX_CONNECTIONS": 50,
    #: Seconds of a Redis outage (a stall, a restart, a failover) that a Redis command rides out,
    #: retrying with back-off on a new connection, before it fails (connections/outages.py).
    "REDIS_OUTAGE_TOLERANCE": 30,
    #: Seconds of a database outage (a restart, a failover, a lock) that a worker's writes of its
    #: job's start and end ride out, retrying with back-off, before the call gets an error result
    #: (running/jobs/rows.py: riding_out_database).
    "DATABASE_OUTAGE_TOLERANCE": 60,
    #: Seconds /readyz gives Redis to answer a PING and the database a SELECT 1 (both at once,
    #: neither retried) before it answers 503 (probes.py): its own short deadline, not the
    #: outage tolerances above, so an orchestrator hears of an outage while the app rides it out.
    "READINESS_CHECK_SECONDS": 2,
    #: The django-redis cache whose server holds sessions and events.
    "CACHE_ALIAS": "default",
    #: Prefix of every Redis key and pub/sub channel this app uses.
    "KEY_PREFIX": "mcp",
    #: Extra browser origins allowed to call the endpoint (exact "scheme://host[:port]").
    "ALLOWED_ORIGINS": [],
    #: Allow http(s)://localhost, 127.0.0.1 and [::1] on any port.
    "ALLOW_LOOPBACK_ORIGINS": True,
    #: Seconds without a request after which a session expires (then 404).
    "SESSION_IDLE_TIMEOUT": 1800,
    #: Largest POST body accepted, in bytes (413 above it). Under daphne it is enforced while the
    #: body arrives (a declared Content-Length over it is refused before any of the body is read).
    "MAX_REQUEST_BYTES": 4 * 1024 * 1024,
    # -- limits on what one client may cost (README "Limits"; each refusal is counted in the
    # metrics as limit_refusals:<name>). The connection ones need daphne (request_limits.py).
    #: Bytes of a request's line and headers, and how many headers it may have (431 above).
    "MAX_HEADER_BYTES": 16 * 1024,
    "MAX_HEADERS": 100,
    #: Seconds from a request's first byte to its last: slower requests get 408 and are closed.
    "REQUEST_RECEIVE_SECONDS": 30,
    #: Seconds a connection may stay open with no request on it (daphne's idle timeout).
    "IDLE_CONNECTION_SECONDS": 60,
    #: Open sessions one client address may hold (429 with Retry-After on initialize above it).
    "MAX_SESSIONS_PER_ADDRESS": 1000,
    #: Sessions one client address may open per period, across every process: a bucket of N that
    #: refills at N per period ("60/m": 60 at once, then one a second). Over it: 429 with
    #: Retry-After on initialize (state/quotas.py). None: no limit.
    "SESSION_OPEN_RATE": "60/m",
    #: Addresses or networks of front proxies whose X-Forwarded-For names the client; a
    #: forwarded header from any other peer is ignored.
    "TRUSTED_PROXIES": [],
    #: Requests of one session running at once (tools, resources, prompts, completions, and its
    #: background jobs until they end; 429 above).
    "MAX_CALLS_PER_SESSION": 32,
    #: The same for sessionless 2026-07-28 requests, per caller: its principal when AUTH is on,
    #: else its client address (TRUSTED_PROXIES). Tasks count until they end.
    "MAX_CALLS_PER_CALLER": 64,
    #: Seconds a web process may admit a caller's inline 2026-07-28 call on its last count of that
    #: caller's background calls (one Redis read) instead of reading it again. A job the process
    #: starts for the caller renews it at once, one another process starts may go unseen this
    #: long, and a refusal is always read afresh. 0: one read per call. Also how long a process
    #: hands out the REQUEST_RATE_LIMIT tokens it took for a caller ahead (state/request_rates.py).
    "CALLER_COUNT_MEMORY_SECONDS": 1,
    #: Requests of any method one caller (as for RATE_LIMIT) may make per period, across every
    #: process, era and transport: a bucket of N that refills at N per period ("1200/m": 1200 at
    #: once, then 20 a second). Over it: 429 with Retry-After (state/request_rates.py). None: no limit.
    "REQUEST_RATE_LIMIT": "1200/m",
    #: tools/call requests one caller (its principal when AUTH is on: every token of a user
    #: shares it; else its client address, TRUSTED_PROXIES) may make per window, across every
    #: process and both eras: "20/m" (s, m, h, d; "10/30s"). Over it: 429 with Retry-After. A
    #: tool's ``@tool(rate_limit=...)`` overrides it (state/rates.py). None: no rate limit.
    "RATE_LIMIT": None,
    #: Seconds an inline tool (one the web process runs) may run; then it is stopped and the call
    #: gets an error result. None: no limit. Background tools have Celery's time limits.
    "TOOL_MAX_SECONDS": 600,
    #: Seconds each database statement of the project's sync code (tools, resources, prompts)
    #: may run in a web process: the database stops it, the call gets a one-sentence error.
    #: A tool's ``@tool(statement_timeout=...)`` overrides it; None: no bound (methods/database_time.py).
    "STATEMENT_TIMEOUT_SECONDS": 10,
    #: Terms a toolset's ``search`` may have, counted as its search backend counts them: each is
    #: one more condition over every search field.
    "SEARCH_MAX_TERMS": 10,
    #: Bytes of one stored event (an SSE message): a larger response becomes an error, a larger
    #: notification is dropped.
    "MAX_EVENT_BYTES": 1024 * 1024,
    #: Bytes of messages the event store keeps per session across its streams (every store);
    #: above it the session's oldest events go first (as for SESSION_MAX_EVENTS). None: no limit.
    "SESSION_MAX_BYTES": 16 * 1024 * 1024,
    #: Bytes of the client's capabilities and clientInfo a session stores (initialize: -32602).
    "MAX_CLIENT_INFO_BYTES": 64 * 1024,
    #: resources/subscribe URIs one session may hold (-32602 above it), and the longest URI.
    "MAX_SUBSCRIPTIONS_PER_SESSION": 100,
    "MAX_URI_BYTES": 2048,
    #: Every message a client sends (both eras, every transport), checked as it is parsed: how
    #: deep arrays and objects may nest in it, and the longest string request id or
    #: progressToken (bytes). Above either: HTTP 400, nothing stored (protocol/bounds.py).
    "MAX_JSON_DEPTH": 64,
    "MAX_ID_BYTES": 256,
    #: Bytes of events replayed to one caller (its principal when AUTH is on, else its client
    #: address) per REPLAY_WINDOW_SECONDS, over every resume of every session (Streamable HTTP
    #: and HTTP+SSE); a resume past it gets 429 with Retry-After. None: no limit.
    "REPLAY_BYTES_PER_CALLER": 64 * 1024 * 1024,
    "REPLAY_WINDOW_SECONDS": 60,
    #: SSE ``retry`` in milliseconds sent with each stream's priming event; None: never sent.
    "SSE_RETRY_MS": 1000,
    #: Seconds between keep-alive comments on idle SSE streams.
    "KEEPALIVE_SECONDS": 15,
    #: Events kept per stream (oldest trimmed first).
    "STREAM_MAXLEN": 1000,
    #: Seconds a stream's events stay replayable after its last event.
    "STREAM_TTL": 3600,
    #: Events kept per session across all its streams; above it the session's oldest go first.
    "SESSION_MAX_EVENTS": 10000,
    #: The event store: a dotted path and its keyword arguments (storage/: ``maxlen``, ``ttl``
    #: and ``session_max_events`` default to the three keys above; the Redis store also takes
    #: ``persist`` "batched" | "write_through" | "off", ``flush_interval``, ``flush_max``,
    #: ``max_unwritten``, ``unwritten_wait``).
    "EVENT_STORE": {"BACKEND": "mcp_transport.storage.redis.RedisEventStore", "OPTIONS": {}},
    #: Seconds between heartbeats of running requests; one silent for 3 beats is an orphan
    #: (its process died) and a resuming client gets an error response for it.
    "HEARTBEAT_SECONDS": 5,
    #: Seconds a web process told to stop (SIGTERM, under daphne or uvicorn) gives the calls it
    #: runs to finish before it answers the ones still running with an error and exits: it takes
    #: no new request meanwhile, and its held streams end with a retry (running/drain.py).
    "DRAIN_SECONDS": 30,
    #: Seconds between samples of the counters for the admin dashboard's charts (one process
    #: takes each sample), and how many samples are kept (1440 x 60 s: a day).
    "DASHBOARD_SAMPLE_SECONDS": 60,
    "DASHBOARD_SAMPLES": 1440,
    #: Polling mode (SEP-1699): close SSE connections this many seconds after they open (0:
    #: right after the priming event), with ``retry``; clients resume with Last-Event-ID.
    #: None keeps them open until the response.
    "POLL_AFTER_SECONDS": None,
    #: Seconds a tool waits for the client's answer to sampling, elicitation or roots.
    "CLIENT_REQUEST_TIMEOUT": 300,
    #: Threads per web process (threads.py): running sync tools; running sync resources,
    #: prompts and completions; how many of either one session may run at once (the rest wait
    #: their turn); sync tools waiting for a client's answer, which hold no tool thread, per
    #: process, per session and per caller (its principal, else its client address; past them
    #: the ask fails at once).
    "SYNC_TOOL_THREADS": 8,
    "SYNC_HANDLER_THREADS": 4,
    "SYNC_THREADS_PER_SESSION": 2,
    #: ... and how many of either one caller (its principal, else its client address) may run
    #: at once, across all its sessions and sessionless calls.
    "SYNC_THREADS_PER_CALLER": 4,
    "SYNC_WAITING_THREADS": 64,
    "SYNC_WAITING_PER_SESSION": 8,
    "SYNC_WAITING_PER_CALLER": 16,
    #: Seconds a sync tool keeps waiting for its client's answer once nobody reads its request's
    #: stream (the client disconnected and has not resumed): then the ask fails with
    #: ClientRequestError and its waiting place is free. None: CLIENT_REQUEST_TIMEOUT.
    "CLIENT_GONE_SECONDS": 30,
    #: Items per page of tools/list, resources/list, resources/templates/list, prompts/list.
    "PAGE_SIZE": 100,
    #: How an agent finds the tools (docs/discovery.md): "list", tools/list lists them all; "search",
    #: it lists the pinned ones (``@tool(pinned=True)``, PINNED_TOOLS) with search_tools and call_tool.
    "TOOL_DISCOVERY": "list",
    #: Names of tools pinned besides those declared ``pinned=True`` ("search" discovery only).
    "PINNED_TOOLS": (),
    #: Level of notifications/message before the client calls logging/setLevel.
    "DEFAULT_LOG_LEVEL": "info",
    #: Module name autodiscovered in every installed app (like admin.py).
    "TOOLS_MODULE": "mcp_tools",
    #: Who may read the Prometheus metrics view (``mcp_transport.urls``): "off" (404 for
    #: everyone), "staff" (logged-in staff users; others 403) or "token" (``Authorization:
    #: Bearer <METRICS_TOKEN>``; others 401).
    "METRICS_ACCESS": "off",
    "METRICS_TOKEN": None,
    #: Retention, enforced by the cleanup (Celery task ``mcp_transport.cleanup`` on a beat
    #: schedule, or ``manage.py mcp_sessions cleanup`` from cron). Seconds a closed session's
    #: row is kept after it closed; None keeps it forever.
    "CLOSED_SESSION_RETENTION": 7 * 86400,
    #: Seconds a stored event row is kept in the database after it was written, whatever its
    #: session; None keeps rows until their session's row goes.
    "EVENT_RETENTION": 86400,
    #: Seconds an ended background job's row (McpJob) is kept after it ended; None: forever.
    "JOB_RETENTION": 7 * 86400,
    #: Seconds between runs of the cleanup, which the app adds to Celery beat's schedule (as
    #: "mcp-transport-cleanup") unless the schedule already has the task; None: the app adds
    #: nothing (cron runs ``manage.py mcp_sessions cleanup`` instead).
    "CLEANUP_INTERVAL": 300,
    #: The calls log (models.McpCall, the admin's Calls list): the share of finished calls that
    #: change nothing it keeps (1: all, 0.1: one in ten, 0: none; a state-changing call is
    #: recorded always: running/audit.py), and the seconds a row is kept (None: forever).
    "CALL_LOG_SAMPLE": 1.0,
    "CALL_LOG_RETENTION": 86400,
    #: The most rows of calls that change nothing a web process keeps per second of each caller
    #: (its principal, else its client address), for calls answered ok and again for the rest
    #: (errors, refusals, cancellations); None: no cap. Past it, calls are served as ever and
    #: only counted (``mcp_calls_log_skipped_total``). State-changing calls are never capped.
    "CALL_LOG_MAX_PER_SECOND": 100,
    #: Arguments whose values the calls log keeps (numbers, strings of up to 100 characters, short
    #: lists of them): the rows a call acts on. Every other argument is kept as its name and its
    #: value's type and size; one named like a secret (password, token, key ...) never shows.
    "CALL_LOG_ARGUMENTS_KEPT": ("id", "pk", "ids", "pks"),
    #: Protocol 2026-07-28: the caching hints of cacheable results, per method, e.g.
    #: {"tools/list": {"ttlMs": 300000, "cacheScope": "public"}}; methods left out keep their
    #: defaults (modern.CACHE_DEFAULTS: 60 s "private" for discover and the lists, 0 for reads).
    "CACHE_HINTS": {},
    #: Protocol 2026-07-28: seconds after which a subscriptions/listen stream ends gracefully
    #: (with its final result; clients listen again); None: only when the client leaves.
    "LISTEN_MAX_SECONDS": 3600,
    #: Protocol 2026-07-28: open subscriptions/listen streams one caller (its principal, else its
    #: client address) may hold per web process (429 with Retry-After above it). Each listen's
    #: resourceSubscriptions obeys MAX_SUBSCRIPTIONS_PER_SESSION and MAX_URI_BYTES.
    "MAX_LISTENS_PER_CALLER": 32,
    #: Who the server is: serverInfo of initialize and of every 2026-07-28 result, and the
    #: Server Card at <endpoint>/server-card (served once SERVER_NAME is a reverse-DNS name,
    #: "com.example/weather", and SERVER_DESCRIPTION is set). SERVER_VERSION None: the app's.
    "SERVER_NAME": "django-mcp-transport",
    "SERVER_TITLE": None,
    "SERVER_VERSION": None,
    #: One line (100 characters at most, as the card allows) of what the server offers.
    "SERVER_DESCRIPTION": None,
    #: An http(s) URL of the server's homepage or documentation.
    "SERVER_WEBSITE_URL": None,
    #: Icons, as MCP's Icon: [{"src": "https://...png", "mimeType": "image/png", "sizes": ["48x48"],
    #: "theme": "light"}]; src is required (an http(s) or data: URI), the rest optional.
    "SERVER_ICONS": [],
    "INSTRUCTIONS": None,
    #: Background tools (running/jobs/): seconds between progress notifications the server sends for a
    #: background call with a progressToken while the tool itself reports nothing (None: never).
    "PROGRESS_HEARTBEAT_SECONDS": 10,
    #: Background tools: Celery's soft and hard time limits (seconds) of a tool that sets none
    #: (``@tool(background={"soft_time_limit": ..., "time_limit": ...})`` overrides them): past
    #: the soft one the tool gets SoftTimeLimitExceeded (an error result), past the hard one
    #: Celery kills its pool process. None: no default limit.
    "JOB_SOFT_TIME_LIMIT": 3600,
    "JOB_TIME_LIMIT": 3660,
    #: Background tools: seconds a cancelled tool has to stop on its own (``ctx.cancelled``)
    #: before the worker kills its pool process, so that a tool blocked in a sleep or a C call
    #: gives its slot back too (worker.stop_job). None: never killed (a tool that does not
    #: check runs to its end or its time limit).
    "JOB_CANCEL_GRACE_SECONDS": 2,
    #: Background tools: seconds a call may wait in the broker for a worker before it fails with
    #: an error result saying that no worker took it (None: wait for ever).
    "JOB_QUEUE_TIMEOUT": 60,
    #: Background tools: a tool that asks its client (elicit, sample, list_roots) gives its
    #: worker slot back once it waits only for answers, and runs again from its start when an
    #: answer arrives, its earlier answers replayed by their index (what it does before an ask
    #: must be safe to repeat); False (or a tool's background={"park": False}): it waits for the
    #: answer in its slot.
    "JOB_PARK_ON_ASK": True,
    #: Background tools waiting for a client in their slot (those that do not park): how many of
    #: a worker's slots may do so at once (None: all but one of its pool processes); past it the
    #: ask fails at once with ClientRequestError. Such a wait lasts JOB_HELD_ASK_TIMEOUT seconds
    #: at most (or CLIENT_REQUEST_TIMEOUT if shorter).
    "JOB_HELD_WAITS": None,
    "JOB_HELD_ASK_TIMEOUT": 60,
    #: Background tools: how many of one caller's jobs (its principal when AUTH is on, else its
    #: client address, TRUSTED_PROXIES honoured) may run at once, across every worker. A job over
    #: it goes back to the queue, still queued and holding no slot, and starts when one of its
    #: caller's jobs ends, in the order the caller sent them; other callers' jobs run meanwhile.
    #: None: all but one of the pool processes of the worker that takes the job (at least 1), and
    #: a caller running a job never takes a worker's last free slot. A freed slot goes to the
    #: waiting caller running the fewest jobs (jobs/shares.py). A tool's own value, by tool name,
    #: in MAX_RUNNING_JOBS_PER_CALLER_BY_TOOL.
    "MAX_RUNNING_JOBS_PER_CALLER": None,
    "MAX_RUNNING_JOBS_PER_CALLER_BY_TOOL": {},
    #: MCP tasks: the ttl (ms) of a task whose request names none, the largest ttl granted
    #: (None: unlimited), and the pollInterval (ms) suggested to clients.
    "TASK_DEFAULT_TTL_MS": 3600 * 1000,
    "TASK_MAX_TTL_MS": 24 * 3600 * 1000,
    "TASK_POLL_INTERVAL_MS": 1000,
    #: Experimental (SEP-2694, a draft): ``tasks/stream`` of the 2026-07-28 tasks extension, a
    #: task's events from the event store, resumable with ``after`` on any process (docs/task-streams.md).
    #: Off: the method does not exist (-32601). Tasks created while it is off have no stream.
    "TASK_STREAMS": False,
    #: OAuth 2.1 resource server (auth/): every request needs a bearer token. Off (the default)
    #: keeps the endpoint open, for local use and the conformance runs.
    "AUTH": False,
    #: Token validators tried in order ({"BACKEND": dotted path, "OPTIONS": {...}}):
    #: auth/validators.py has static tokens, django-oauth-toolkit, JWT (JWKS), introspection.
    "AUTH_VALIDATORS": [{"BACKEND": "mcp_transport.auth.validators.StaticTokenValidator"},
                        {"BACKEND": "mcp_transport.auth.validators.OAuthToolkitValidator"}],
    #: The endpoint's URL as clients reach it (RFC 9728 "resource", the RFC 8707 audience);
    #: None: each request's scheme, Host and path.
    "AUTH_RESOURCE": None,
    #: Issuer URLs of the authorization servers (metadata "authorization_servers"); None: this
    #: server's own origin (the project is its own authorization server).
    "AUTH_SERVERS": None,
    #: "scopes_supported" in the metadata, and the scopes every request's token must have.
    "AUTH_SCOPES": ["mcp"],
    "AUTH_REQUIRED_SCOPES": ["mcp"],
    #: Seconds a token's validation result (and its user) is cached, and how many a process keeps.
    "AUTH_CACHE_SECONDS": 60,
    "AUTH_CACHE_SIZE": 10000,
    #: Seconds a process remembers that a token was refused (unknown, expired, revoked), so that a
    #: client repeating it costs no database lookup. A token created meanwhile works at once (its
    #: creation reaches every process on the control channel); only a process that missed that
    #: message may refuse it, for at most this long. None or 0: every request looks it up.
    "AUTH_FAILURE_CACHE_SECONDS": 10,
    #: Failed token lookups one client network (an IPv4 address, an IPv6 /64) may cause per
    #: AUTH_FAILURE_WINDOW seconds, on every process together: past it, a token that no cache
    #: knows gets 429 with Retry-After before any lookup. None or 0: no bound.
    "AUTH_FAILURES_PER_ADDRESS": 60,
    "AUTH_FAILURE_WINDOW": 60,
    #: Seconds a subscription may deliver an update on its process's copy of the listener's
    #: permissions (a 2026-07-28 listen, a 2025-11-25 subscriber) before loading them again; a
    #: change of a user's permissions, groups or flags drops the copies on every process at once
    #: (auth/permissions.py), so this bounds only a process that missed that message (and a
    #: saving process that hears none: a shell, a Celery worker). None or 0: loaded for every update.
    "PERMISSION_CACHE_SECONDS": 5,
    # -- the authorization server (mcp_transport.oauth, opt-in): dynamic client registration bounds.
    #: Registrations one client network (an IPv4 address, an IPv6 /64) may make per
    #: OAUTH_REGISTRATION_WINDOW seconds (429 above).
    "OAUTH_REGISTRATIONS_PER_ADDRESS": 20,
    "OAUTH_REGISTRATION_WINDOW": 3600,
    #: Dynamically registered clients kept in all; a registration that finds it full deletes
    #: unused clients (no code or token issued): those older than OAUTH_UNUSED_CLIENT_SECONDS,
    #: then the oldest. 503 only when every client is in use.
    "OAUTH_MAX_REGISTERED_CLIENTS": 10000,
    "OAUTH_UNUSED_CLIENT_SECONDS": 86400,
    #: Multi-round-trip requests (2026-07-28): seconds a requestState stays valid; a background
    #: call waiting on the client's answer waits CLIENT_REQUEST_TIMEOUT at most.
    "REQUEST_STATE_TTL": 600,
    #: Bytes of a sealed requestState (the answers a round carries to the next): a round that
    #: would carry more gets -32602, a longer state presented is refused unread. Also the most
    #: a request may give ahead to a background call (its job keeps them: running/jobs/submitting.py).
    "MAX_REQUEST_STATE_BYTES": 256 * 1024,
    #: Seconds a process may trust its memory for revocable tokens (static, django-oauth-toolkit)
    #: instead of reading Redis on every request (a GET cost a tenth of a call's throughput). A
    #: revocation reaches every process through the control channel at once; only a request
    #: racing with that message, or a process that missed it (its subscription was down), may
    #: pass, for at most this long. 0: Redis on every request (revoked on the very next one).
    "AUTH_REVOCABLE_MEMORY_SECONDS": 10,
}


@cache
def get_config() -> dict:
    user = getattr(settings, "MCP_TRANSPORT", {})
    unknown = set(user) - set(DEFAULTS)
    if unknown:
        raise ImproperlyConfigured(f"Unknown MCP_TRANSPORT keys: {', '.join(sorted(unknown))}.")
    return {**DEFAULTS, **user}


def per_config(make):
    """``make()`` made once for each configuration, and again once the settings change: what a
    request would otherwise rebuild from the same settings every time."""
    made = [None, None]  # the configuration it was made for, and what was made

    @functools.wraps(make)
    def value():
        config = get_config()
        if made[0] is not config:
            made[:] = config, make()
        return made[1]
    return value


@per_config
def message_bounds() -> bounds.Bounds:
    """The shape every client message must keep (MAX_JSON_DEPTH, MAX_ID_BYTES)."""
    config = get_config()
    return bounds.Bounds(max_depth=config["MAX_JSON_DEPTH"], max_id_bytes=config["MAX_ID_BYTES"])


def redis_url() -> str:
    config = get_config()
    if config["REDIS_URL"]:
        return config["REDIS_URL"]
    location = settings.CACHES[config["CACHE_ALIAS"]]["LOCATION"]
    return location[0] if isinstance(location, (list, tuple)) else location


@receiver(setting_changed)
def _reset(*, setting, **kwargs):
    if setting in ("MCP_TRANSPORT", "CACHES"):
        get_config.cache_clear()
