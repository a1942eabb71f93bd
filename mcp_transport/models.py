"""The durable record of sessions. Redis holds the live copy (sessions.py); the admin reads these."""
from django.conf import settings
from django.db import models

from .protocol.session import SessionState


class McpSession(models.Model):
    STATES = [(state.value, state.name.title()) for state in SessionState]

    id = models.CharField(primary_key=True, max_length=128, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL,
                             related_name="mcp_sessions")
    state = models.CharField(max_length=16, choices=STATES, default=SessionState.INITIALIZING.value)
    protocol_version = models.CharField(max_length=16)
    client_name = models.CharField(max_length=200, blank=True)
    client_version = models.CharField(max_length=100, blank=True)
    client_info = models.JSONField(default=dict, blank=True)
    client_capabilities = models.JSONField(default=dict, blank=True)
    log_level = models.CharField(max_length=16, default="info")
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
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
    message = models.JSONField(null=True, blank=True)
    #: The last event of a POST stream.
    final = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name = "stored event"
        constraints = [models.UniqueConstraint(fields=["session_id", "stream", "position"],
                                               name="mcp_event_unique_position")]
        indexes = [models.Index(fields=["session_id", "stream", "position_ms", "position_seq"],
                                name="mcp_event_order")]

    def __str__(self):
        return f"{self.session_id[:8]}… {self.stream}.{self.position}"
