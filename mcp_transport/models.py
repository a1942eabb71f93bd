"""The durable record of sessions. Redis holds the live copy (sessions.py); the admin reads these."""
from django.conf import settings
from django.db import models
from django.utils import timezone

from .fields import SafeCharField, SafeJSONField, SafeTextField
from .protocol.session import SessionState


class McpSession(models.Model):
    STATES = [(state.value, state.name.title()) for state in SessionState]

    id = models.CharField(primary_key=True, max_length=128, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="mcp_sessions")
    #: Who may use the session (auth.Principal.key: "user:<pk>", "client:<id>"; "" for anyone
    #: when auth is off). Another principal presenting the session id gets 404.
    principal = models.CharField(max_length=255, blank=True, default="")
    state = models.CharField(max_length=16, choices=STATES, default=SessionState.INITIALIZING.value)
    protocol_version = models.CharField(max_length=16)
    client_name = SafeCharField(max_length=200, blank=True)
    client_version = SafeCharField(max_length=100, blank=True)
    client_info = SafeJSONField(default=dict, blank=True)
    client_capabilities = SafeJSONField(default=dict, blank=True)
    log_level = models.CharField(max_length=16, default="info")
    #: When the session opened (its initialize), which may be well before its row is written: a
    #: session has a row once it did something (state/session_rows.py).
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    last_seen_at = models.DateTimeField(db_index=True)
    closed_at = models.DateTimeField(null=True, blank=True)
    #: "deleted" (client DELETE), "expired" (idle timeout) or "terminated" (server side).
    closed_reason = models.CharField(max_length=16, blank=True)

    class Meta:
        verbose_name = "MCP session"
        ordering = ["-last_seen_at"]
        indexes = [models.Index(fields=["state", "last_seen_at"])]

    def __str__(self):
        return f"{self.id[:8]}… {self.client_name or 'unknown client'}"

    @property
    def is_open(self):
        return self.state != SessionState.CLOSED.value


class StoredEvent(models.Model):
    """One event of an SSE stream: the durable record behind the event store.

    No foreign key to McpSession, so that writing events never waits on (or locks) the session
    row. Positions are Redis stream entry ids ``<ms>-<seq>``; ``position_ms`` and
    ``position_seq`` order them (the string itself does not sort numerically).
    """

    # Indexed through the unique constraint and the index below, which both start with it.
    session_id = models.CharField(max_length=128)
    stream = models.CharField(max_length=32)
    position = models.CharField(max_length=48)
    position_ms = models.BigIntegerField()
    position_seq = models.IntegerField()
    #: The JSON-RPC message; null for a priming event or a terminal marker.
    message = SafeJSONField(null=True, blank=True)
    #: The last event of a POST stream.
    final = models.BooleanField(default=False)
    #: Bytes of the message as compact JSON (0 for none): what SESSION_MAX_BYTES counts.
    size = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "stored event"
        constraints = [models.UniqueConstraint(fields=["session_id", "stream", "position"],
                                               name="mcp_event_unique_position")]
        indexes = [models.Index(fields=["session_id", "stream", "position_ms", "position_seq"],
                                name="mcp_event_order")]

    def __str__(self):
        return f"{self.session_id[:8]}… {self.stream}.{self.position}"


class McpJob(models.Model):
    """One call of a background tool, run by a Celery worker (running/jobs/, running/worker/).

    It is also the MCP task of a task-augmented ``tools/call``: ``id`` is the ``taskId``. The
    status values are the MCP task statuses (spec 2025-11-25 basic/utilities/tasks) plus
    ``queued`` (accepted, no worker has started it yet), which clients see as ``working``.
    No foreign key to McpSession, so that a job never waits on (or locks) the session row.
    """

    class Status(models.TextChoices):
        QUEUED = "queued", "Queued"
        WORKING = "working", "Working"
        INPUT_REQUIRED = "input_required", "Input required"
        COMPLETED = "completed", "Completed"
        FAILED = "failed", "Failed"
        CANCELLED = "cancelled", "Cancelled"

    #: Statuses a job never leaves: "Tasks with a completed, failed, or cancelled status are in
    #: a terminal state and MUST NOT transition to any other status".
    TERMINAL = (Status.COMPLETED, Status.FAILED, Status.CANCELLED)
    ACTIVE = (Status.QUEUED, Status.WORKING, Status.INPUT_REQUIRED)

    #: Random and unguessable: it is the MCP taskId too.
    id = models.CharField(primary_key=True, max_length=64, editable=False)
    session_id = models.CharField(max_length=128, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="mcp_jobs")
    #: The principal of the call (auth.Principal.key), as on its session.
    principal = models.CharField(max_length=255, blank=True, default="")
    #: The JSON-RPC id of the tools/call request (a string or a number).
    request_id = SafeJSONField(null=True, blank=True)
    #: The SSE stream the job's messages go on (the POST stream of a plain call).
    stream_key = models.CharField(max_length=32)
    tool = models.CharField(max_length=200, db_index=True)
    arguments = SafeJSONField(default=dict, blank=True)
    progress_token = SafeJSONField(null=True, blank=True)
    #: A task-augmented call (MCP tasks): answered with a task handle, its result via tasks/result.
    is_task = models.BooleanField(default=False)
    #: The MCP task's ttl in milliseconds (None: unlimited).
    ttl_ms = models.BigIntegerField(null=True, blank=True)
    status = models.CharField(max_length=16, choices=Status.choices, default=Status.QUEUED, db_index=True)
    progress = models.FloatField(null=True, blank=True)
    total = models.FloatField(null=True, blank=True)
    #: The last progress message, or why the job failed or was cancelled.
    message = SafeTextField(blank=True)
    celery_task_id = models.CharField(max_length=64, blank=True, db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    #: The Celery worker (hostname and process id) of the last attempt.
    worker = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    #: The CallToolResult (``isError`` results included), once the job completed or failed.
    result = SafeJSONField(null=True, blank=True)
    #: Why the job failed or was cancelled, in one sentence (empty otherwise).
    error = SafeTextField(blank=True)
    #: A 2026-07-28 call, which has no session to read from: ``era``, the request's
    #: ``clientCapabilities`` and ``logLevel``; and ``failure: "internal"`` once it failed for
    #: the server's reasons (a crash, a limit, a lost worker) rather than the tool's.
    context = SafeJSONField(default=dict, blank=True)

    class Meta:
        verbose_name = "MCP job"
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["session_id", "created_at"], name="mcp_job_session_created")]

    def __str__(self):
        return f"{self.tool} {self.id[:8]}… ({self.status})"

    @property
    def is_terminal(self) -> bool:
        return self.status in self.TERMINAL

    @property
    def duration(self):
        """Seconds from start to finish (or to now while running); None before it started."""
        if self.started_at is None:
            return None
        from django.utils import timezone

        return ((self.finished_at or timezone.now()) - self.started_at).total_seconds()


class McpToken(models.Model):
    """A bearer token for a machine client (``manage.py mcp_tokens``, the admin).

    Only the token's SHA-256 is stored (tokens are 256 random bits, so a fast hash is enough);
    the token itself is shown once, when it is created. ``prefix`` (its first characters)
    lets people tell tokens apart."""

    #: Every static token starts with this, so validators of other kinds skip it at once.
    PREFIX = "mcp_"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="mcp_tokens")
    name = models.CharField(max_length=200, blank=True, help_text="What the token is for.")
    digest = models.CharField(max_length=64, unique=True, editable=False)
    prefix = models.CharField(max_length=16, editable=False)
    #: Space-separated scopes (RFC 6749 §3.3).
    scope = models.CharField(max_length=500, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField(null=True, blank=True, help_text="Empty: never expires.")
    revoked_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        verbose_name = "MCP token"
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.prefix}… ({self.user})"

    @classmethod
    def new_secret(cls) -> str:
        import secrets

        return cls.PREFIX + secrets.token_urlsafe(32)

    def set_secret(self, secret: str) -> None:
        import hashlib

        self.digest = hashlib.sha256(secret.encode()).hexdigest()
        self.prefix = secret[:12]

    @property
    def status(self) -> str:
        from django.utils import timezone

        if self.revoked_at is not None:
            return "revoked"
        if self.expires_at is not None and self.expires_at <= timezone.now():
            return "expired"
        return "active"


class McpCall(models.Model):
    """One finished request of either protocol era, for the admin's Calls list: every call that
    changes state (running/audit.py), and of the others a sample (``CALL_LOG_SAMPLE``) within
    each caller's ``CALL_LOG_MAX_PER_SECOND``. Written in batches off the request path
    (running/calls.py), kept for ``CALL_LOG_RETENTION`` seconds (the cleanup deletes older rows)."""

    class Era(models.TextChoices):
        SESSIONS = "2025-11-25", "2025-11-25 (sessions)"
        STATELESS = "2026-07-28", "2026-07-28 (stateless)"

    class Outcome(models.TextChoices):
        OK = "ok", "ok"
        TOOL_ERROR = "tool_error", "tool error (isError)"
        ERROR = "error", "JSON-RPC error"
        BACKGROUND = "background", "handed to a job"
        INPUT_REQUIRED = "input_required", "input required"
        CANCELLED = "cancelled", "cancelled"

    started_at = models.DateTimeField(db_index=True)
    era = models.CharField(max_length=16, choices=Era.choices)
    method = models.CharField(max_length=64, db_index=True)
    #: The tool or prompt name, or the resource URI (truncated); empty for other methods.
    target = SafeCharField(max_length=500, blank=True)
    principal = models.CharField(max_length=255, blank=True, default="")
    client_name = SafeCharField(max_length=200, blank=True)
    status = models.CharField(max_length=16, choices=Outcome.choices, db_index=True)
    #: The JSON-RPC error code of an error answer.
    error_code = models.IntegerField(null=True, blank=True)
    duration_ms = models.FloatField()
    request_bytes = models.PositiveIntegerField(default=0)
    response_bytes = models.PositiveIntegerField(null=True, blank=True)
    #: The session of a 2025-11-25 call; empty for a 2026-07-28 one (none exists).
    session_id = models.CharField(max_length=128, blank=True, default="")
    #: The background job the call started or continued (McpJob.id), if any.
    job_id = models.CharField(max_length=64, blank=True, default="", db_index=True)
    #: The JSON-RPC id of the request (a number as its digits).
    request_id = SafeCharField(max_length=200, blank=True)
    #: The OpenTelemetry trace of the call's span (32 hex digits), when spans are recorded: where
    #: a tracing backend shows the call across web process, Redis, database and worker.
    trace_id = models.CharField(max_length=32, blank=True, default="", db_index=True)
    #: The call may have changed state (a tool not marked read-only, a toolset's write, an admin
    #: action, a job's cancel): recorded always, never sampled or capped (running/audit.py).
    changes_state = models.BooleanField("state-changing", default=False, db_default=False)
    #: The call's arguments, redacted (running/audit.py): each name with its value's type and size,
    #: the values of CALL_LOG_ARGUMENTS_KEPT (the rows it acts on), never a secret's.
    arguments = models.JSONField(null=True, blank=True)
    #: The client's address (TRUSTED_PROXIES honoured): who called when no principal did. (The
    #: defaults are the database's too: a process of the previous version still inserts rows.)
    client_address = models.CharField(max_length=64, blank=True, default="", db_default="")

    class Meta:
        verbose_name = "MCP call"
        ordering = ["-started_at"]
        # The audit trail (the admin's "state-changing" filter): only those rows are indexed.
        indexes = [models.Index(fields=["-started_at"], condition=models.Q(changes_state=True),
                                name="mcp_call_changes_state")]

    def __str__(self):
        return f"{self.method} {self.target}".strip()
