"""The calls admin: recent finished requests of both eras (models.McpCall, running/calls.py),
with filters, search and a page per call. A call names its session and its job by reference
(refs.py), as the other lists do: neither id appears in the list's HTML. The "state-changing"
filter is the audit trail (running/audit.py): every such call, with its redacted arguments on
its page."""
import json

from django.contrib import admin
from django.utils.html import format_html

from ..models import McpCall, McpJob, McpSession
from . import refs
from .jobs import moment_html
from .paging import CappedPaginator

Outcome = McpCall.Outcome
OUTCOME_COLOURS = {Outcome.OK: "#1b7f3b", Outcome.TOOL_ERROR: "#b26b00", Outcome.ERROR: "#ba2121",
                   Outcome.BACKGROUND: "#0072B2", Outcome.INPUT_REQUIRED: "#6b6b6b", Outcome.CANCELLED: "#8a4f7d"}


def job_link(job_id: str):
    if not job_id:
        return "–"
    return format_html('<a href="{}"><code>{}…</code></a>', refs.admin_url(refs.JOBS, McpJob, job_id), job_id[:8])


def session_link(session_id: str):
    if not session_id:
        return format_html('<span title="{}">–</span>', "2026-07-28: no session")
    url = refs.admin_url(refs.SESSIONS, McpSession, session_id)
    return format_html('<a href="{}"><code>{}…</code></a>', url, session_id[:8])


def clipped(text: str, length: int):
    if len(text) <= length:
        return text
    return format_html('<span title="{}">{}…</span>', text, text[:length - 1])


@admin.register(McpCall)
class McpCallAdmin(admin.ModelAdmin):
    list_display = ("started", "era_text", "method_text", "target_text", "status_badge", "duration", "bytes_text",
                    "principal_text", "client_text", "job", "session")
    list_display_links = ("started",)
    list_filter = ("changes_state", "era", "status", "method")
    search_fields = ("target", "client_name", "principal", "=request_id", "=trace_id", "=client_address")
    search_help_text = "Tool, prompt or resource; client name; principal; exact request id or client address."
    list_per_page = 100
    paginator = CappedPaginator
    show_full_result_count = False
    fieldsets = (
        (None, {"fields": ("started_at", "era", "method", "target", "changes_state", "arguments_text", "status",
                           "error_code", "duration", "request_bytes", "response_bytes")}),
        ("Caller", {"fields": ("principal", "client_address", "client_name", "request_id", "session", "job",
                               "trace_id")}),
    )
    readonly_fields = ("started_at", "era", "method", "target", "changes_state", "arguments_text", "status",
                       "error_code", "duration", "request_bytes", "response_bytes", "principal", "client_address",
                       "client_name", "request_id", "session", "job", "trace_id")

    class Media:
        css = {"all": ("mcp_transport/admin.css",)}

    @admin.display(description="started", ordering="started_at")
    def started(self, obj):
        return moment_html(obj.started_at, seconds=True)

    @admin.display(description="era", ordering="era")
    def era_text(self, obj):
        return obj.era

    # What a client sent is clipped in the list (whole in the title and on the call's page): a
    # tool name or URI of 500 characters with no space made the table wider than the window.
    @admin.display(description="method", ordering="method")
    def method_text(self, obj):
        return clipped(obj.method, 24)

    @admin.display(description="target", ordering="target")
    def target_text(self, obj):
        return clipped(obj.target, 40)

    @admin.display(description="principal", ordering="principal")
    def principal_text(self, obj):
        return clipped(obj.principal, 24)

    @admin.display(description="client", ordering="client_name")
    def client_text(self, obj):
        return clipped(obj.client_name, 24)

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj):
        label = obj.get_status_display() + (f" {obj.error_code}" if obj.error_code is not None else "")
        return format_html('<span class="mcp-badge" style="background:{}">{}</span>',
                           OUTCOME_COLOURS.get(obj.status, "#777"), label)

    @admin.display(description="duration", ordering="duration_ms")
    def duration(self, obj):
        return f"{obj.duration_ms:.1f} ms" if obj.duration_ms < 10_000 else f"{obj.duration_ms / 1000:.1f} s"

    @admin.display(description="bytes in / out")
    def bytes_text(self, obj):
        out = "–" if obj.response_bytes is None else f"{obj.response_bytes:,}"
        return f"{obj.request_bytes:,} / {out}"

    @admin.display(description="arguments")
    def arguments_text(self, obj):
        """Redacted when recorded (running/audit.py): names, types and sizes, the kept values."""
        if obj.arguments is None:
            return "–"
        return format_html('<pre class="mcp-json">{}</pre>',
                           json.dumps(obj.arguments, indent=2, ensure_ascii=False, sort_keys=True))

    @admin.display(description="job")
    def job(self, obj):
        return job_link(obj.job_id)

    @admin.display(description="session")
    def session(self, obj):
        return session_link(obj.session_id)

    def has_add_permission(self, request):
        return False  # calls are recorded by the server

    def has_change_permission(self, request, obj=None):
        return False  # a record: viewed, never edited

    def has_delete_permission(self, request, obj=None):
        return False  # the cleanup deletes rows past CALL_LOG_RETENTION
