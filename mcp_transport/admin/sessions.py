"""The sessions admin: a list with live counters from Redis, a page per session with its
streams and buffered events, and the terminate and purge actions."""
import json
from functools import partial
from datetime import datetime, timedelta
from datetime import timezone as dt_timezone

from asgiref.sync import async_to_sync
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import Count, Max, Min, Q
from django.http import HttpResponseNotAllowed, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import path
from django.utils import timezone
from django.utils.html import format_html

from ..conf import get_config
from ..state import samples
from ..state import sessions as live_sessions
from ..models import McpJob, McpSession, StoredEvent
from ..protocol import versions
from ..protocol.ids import GET_STREAM
from ..protocol.session import SessionState
from ..storage import get_event_store
from . import catalog, dashboard, live, mcp_apps, refs, skills
from . import jobs as job_admin
from .paging import CappedPaginator, FastListMixin

#: Events per page on a session's page.
EVENTS_PER_PAGE = 50
#: Streams and background jobs listed on a session's page (the most recent first).
STREAMS_SHOWN = 50
JOBS_SHOWN = 20
#: The shortest period the dashboard's job charts cover.
JOB_PERIOD_MIN = timedelta(minutes=2)
STATE_COLOURS = {"initializing": "#8a6d00", "ready": "#1b7f3b", "closed": "#777"}


class StreamingFilter(admin.SimpleListFilter):
    """Sessions with an open SSE stream now, on any process (from Redis, no table scan)."""

    title = "streaming now"
    parameter_name = "streaming"

    def lookups(self, request, model_admin):
        return [("yes", "Yes"), ("no", "No")]

    def queryset(self, request, queryset):
        if self.value() in ("yes", "no"):
            ids = live.sessions_streaming()
            return queryset.filter(pk__in=ids) if self.value() == "yes" else queryset.exclude(pk__in=ids)
        return queryset


class ChoicesFilter(admin.SimpleListFilter):
    """A filter whose choices are known in advance: no SELECT DISTINCT over the table."""

    field = ""
    values = ()

    def lookups(self, request, model_admin):
        return [(value, value) for value in self.values]

    def queryset(self, request, queryset):
        return queryset.filter(**{self.field: self.value()}) if self.value() else queryset


class ClosedReasonFilter(ChoicesFilter):
    parameter_name = field = "closed_reason"
    title = "closed because"
    values = ("deleted", "expired", "terminated")


class ProtocolVersionFilter(ChoicesFilter):
    parameter_name = field = "protocol_version"
    title = "protocol version"
    values = versions.SUPPORTED


class SessionChangeList(refs.ReferenceChangeList):
    """Rows with their live counters, linked by reference (refs.py)."""

    def get_results(self, request):
        super().get_results(request)
        rows = list(self.result_list)  # the page's rows, cached on the queryset the template reads
        stats = live.fetch([row.pk for row in rows])
        for row in rows:
            row.live = stats[row.pk]


def session_url(session_id, view="change") -> str:
    """A session's admin page (or its terminate and purge views), by reference."""
    return refs.admin_url(refs.SESSIONS, McpSession, session_id, view)


def terminate(session_ids, by=live_sessions.SERVER) -> int:
    """Close the open ones of these sessions as the server, in one batch (sessions.close_many,
    the path of a DELETE): their streams end on every process, later requests get 404. ``by``:
    who did it (job_admin.operator), which the audit trail's rows of their stopped jobs name."""
    open_ids = list(McpSession.objects.filter(pk__in=list(session_ids))
                    .exclude(state=SessionState.CLOSED.value).values_list("pk", flat=True))
    if open_ids:
        async_to_sync(live_sessions.close_many)(open_ids, "terminated", by)
    return len(open_ids)


def purge(session_ids) -> int:
    """Drop these sessions' buffered events, in the store and the database (one batch);
    returns how many the store held."""
    async def drop_all():
        store = get_event_store()
        held = await store.buffered(session_ids)
        await store.delete_sessions(session_ids)
        return sum(sum(streams.values()) for streams in held.values())

    return async_to_sync(drop_all)() if session_ids else 0


def _chunks(ids, size=500):
    ids = list(ids)
    for start in range(0, len(ids), size):
        yield ids[start:start + size]


def _moment(value) -> str:
    """A compact local date and time for list columns."""
    return job_admin.moment_html(value)


def _describe(message) -> str:
    """A one-line summary of an event's message."""
    if message is None:
        return "priming event / end of stream"
    if "method" in message:
        return message["method"] + (" (request)" if "id" in message else "")
    if "error" in message:
        return f"error response to {json.dumps(message.get('id'))}: {message['error'].get('message', '')}"
    return f"response to {json.dumps(message.get('id'))}"


@admin.register(McpSession)
class McpSessionAdmin(refs.ByReference, FastListMixin, admin.ModelAdmin):
    list_display = ("short_id", "user", "client", "protocol", "created", "last_seen", "state_badge",
                    "open_streams", "buffered_events", "replays", "resumes")
    list_display_links = ("short_id",)
    references = refs.SESSIONS
    changelist_class = SessionChangeList
    list_filter = (StreamingFilter, "state", ClosedReasonFilter, ProtocolVersionFilter)
    search_fields = ("^id", "client_name", "user__username")
    search_help_text = "Session id prefix, client name or username."
    list_select_related = ("user",)
    list_per_page = 100
    paginator = CappedPaginator
    show_full_result_count = False
    actions = ("terminate_sessions", "purge_buffers")
    readonly_fields = ("id", "user", "state", "closed_reason", "protocol_version", "client_name", "client_version",
                       "log_level", "created_at", "last_seen_at", "closed_at", "pretty_client_info",
                       "pretty_capabilities")
    fieldsets = (
        (None, {"fields": ("id", "user", "state", "closed_reason", "protocol_version", "log_level")}),
        ("Client", {"fields": ("client_name", "client_version", "pretty_client_info", "pretty_capabilities")}),
        ("Times", {"fields": ("created_at", "last_seen_at", "closed_at")}),
    )

    # -- the list --------------------------------------------------------------------------

    @admin.display(description="session", ordering="id")
    def short_id(self, obj):
        # The first characters only (no title with the rest): the full id is the session's
        # credential, shown on the session's own page.
        return format_html("<code>{}…</code>", obj.id[:8])

    @admin.display(description="client", ordering="client_name")
    def client(self, obj):
        return f"{obj.client_name} {obj.client_version}".strip() or "–"  # wraps in a narrow window (admin.css)

    @admin.display(description="protocol", ordering="protocol_version")
    def protocol(self, obj):
        return format_html('<span class="mcp-nowrap">{}</span>', obj.protocol_version)

    @admin.display(description="created", ordering="created_at")
    def created(self, obj):
        return _moment(obj.created_at)

    @admin.display(description="last seen", ordering="last_seen_at")
    def last_seen(self, obj):
        return _moment(obj.last_seen_at)

    @admin.display(description="state", ordering="state")
    def state_badge(self, obj):
        label = obj.state if obj.is_open else f"closed ({obj.closed_reason or '?'})"
        return format_html('<span class="mcp-badge" style="background:{}">{}</span>',
                           STATE_COLOURS.get(obj.state, "#777"), label)

    def _live(self, obj):
        return getattr(obj, "live", None) or live.LiveStats()

    @admin.display(description="streams")
    def open_streams(self, obj):
        return self._live(obj).open_streams

    @admin.display(description="buffered")
    def buffered_events(self, obj):
        return self._live(obj).buffered

    @admin.display(description="replays (failed)")
    def replays(self, obj):
        stats = self._live(obj)
        return f"{stats.replays} ({stats.replay_failures})" if stats.replay_failures else stats.replays

    @admin.display(description="resumes")
    def resumes(self, obj):
        return self._live(obj).resumes

    # -- the session page ------------------------------------------------------------------

    @admin.display(description="client info")
    def pretty_client_info(self, obj):
        return format_html('<pre class="mcp-json">{}</pre>', json.dumps(obj.client_info, indent=2, ensure_ascii=False))

    @admin.display(description="client capabilities")
    def pretty_capabilities(self, obj):
        return format_html('<pre class="mcp-json">{}</pre>',
                           json.dumps(obj.client_capabilities, indent=2, ensure_ascii=False))

    def has_add_permission(self, request):
        return False  # sessions begin with initialize, never here

    def has_delete_permission(self, request, obj=None):
        return False  # deleting a row would leave the live session running: terminate instead

    def change_queryset(self, request):
        return McpSession.objects.select_related("user")

    def change_context(self, request, obj) -> dict:
        return {**self.session_context(request, obj),
                "show_save": False, "show_save_and_continue": False, "show_save_and_add_another": False}

    def session_context(self, request, session) -> dict:
        stats = live.fetch([session.pk])[session.pk]
        stream = request.GET.get("stream") or None
        events = StoredEvent.objects.filter(session_id=session.pk)
        if stream:
            events = events.filter(stream=stream)
        ordered = events.order_by("-position_ms", "-position_seq").values_list(
            "stream", "position", "message", "final", "created_at")
        page = CappedPaginator(ordered, EVENTS_PER_PAGE).get_page(request.GET.get("page"))
        return {
            "live": stats,
            "streams": self.session_streams(session, stats),
            "stream_filter": stream,
            "events_page": page,
            "events": [{"id": f"{key}.{position}", "stream": key, "summary": _describe(message), "final": final,
                        "created_at": created, "json": json.dumps(_task_ids_cut(message), indent=2, ensure_ascii=False)
                        if message is not None else ""}
                       for key, position, message, final, created in page.object_list],
            "can_act": self.has_change_permission(request, session),
            "jobs": self.session_jobs(session),
        }

    def session_jobs(self, session) -> list:
        """The session's most recent background jobs, with what their progress bars show."""
        rows = McpJob.objects.filter(session_id=session.pk).order_by("-created_at")[:JOBS_SHOWN]
        # By reference, as the jobs list names them: a job id is a task's handle (refs.py).
        return [{"job": job, "ref": refs.job_ref(job.pk), "url": job_admin.job_url(job.pk),
                 "state": job_admin.progress_state(job), "bar": job_admin.progress_bar_html(job)}
                for job in rows]

    def session_streams(self, session, stats) -> list:
        """The session's streams, most recent first: what the database and the store keep."""
        rows = (StoredEvent.objects.filter(session_id=session.pk).values("stream").order_by()
                .annotate(stored=Count("pk"), first=Min("created_at"), last=Max("created_at"),
                          complete=Count("pk", filter=Q(final=True)))
                .order_by("-last")[:STREAMS_SHOWN])
        found = {row["stream"]: {**row, "buffered": 0} for row in rows}
        for key, buffered in stats.buffered_by_stream.items():
            found.setdefault(key, {"stream": key, "stored": 0, "first": None, "last": None, "complete": 0})
            found[key]["buffered"] = buffered
        for row in found.values():
            row["kind"] = "GET (standalone)" if row["stream"] == GET_STREAM else "POST request"
        return list(found.values())

    # -- actions ---------------------------------------------------------------------------

    @admin.action(description="Terminate selected sessions (streams close, then 404)", permissions=["change"])
    def terminate_sessions(self, request, queryset):
        by = job_admin.operator(request)
        done = sum(terminate(chunk, by) for chunk in _chunks(queryset.exclude(state=SessionState.CLOSED.value)
                                                             .values_list("pk", flat=True)))
        self.message_user(request, f"Terminated {done} session(s).", messages.SUCCESS)

    @admin.action(description="Purge buffered events of selected sessions", permissions=["change"])
    def purge_buffers(self, request, queryset):
        ids = list(queryset.values_list("pk", flat=True))
        events = sum(purge(chunk) for chunk in _chunks(ids))
        self.message_user(request, f"Purged the buffers of {len(ids)} session(s): {events} event(s).", messages.SUCCESS)

    # -- extra pages -----------------------------------------------------------------------

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("dashboard/", wrap(self.dashboard_view), name="mcp_transport_dashboard"),
            path("skills/", wrap(partial(skills.skills_view, self)), name="mcp_transport_skills"),
            path("tools/", wrap(partial(catalog.catalog_view, self)), name="mcp_transport_tools"),
            path("apps/", wrap(partial(mcp_apps.apps_view, self)), name="mcp_transport_apps"),
            path("apps/preview/", wrap(partial(mcp_apps.preview_view, self)), name="mcp_transport_app_preview"),
            path("<path:object_id>/terminate/", wrap(self.terminate_view), name="mcp_transport_mcpsession_terminate"),
            path("<path:object_id>/purge/", wrap(self.purge_view), name="mcp_transport_mcpsession_purge"),
            *super().get_urls(),
        ]

    def _act_on_one(self, request, object_id, act, message):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        session = self.object_or_404(McpSession.objects.all(), object_id)
        if not self.has_change_permission(request, session):
            raise PermissionDenied
        act([session.pk])
        self.message_user(request, message, messages.SUCCESS)
        return HttpResponseRedirect(session_url(session.pk))

    def terminate_view(self, request, object_id):
        by = job_admin.operator(request)
        return self._act_on_one(request, object_id, lambda ids: terminate(ids, by), "Session terminated.")

    def purge_view(self, request, object_id):
        return self._act_on_one(request, object_id, purge, "Buffered events purged.")

    def dashboard_view(self, request):
        # The counters are the sessions' (their view permission); the job charts need the jobs'.
        if not self.has_view_permission(request):
            raise PermissionDenied
        history = async_to_sync(samples.recent)()
        now = async_to_sync(samples.current)()
        cards, charts = dashboard.cards(now), dashboard.charts(history + [now])
        cards.append(dashboard.rate_card(now, get_config()["RATE_LIMIT"], dashboard.tool_rates()))
        if request.user.has_perm("mcp_transport.view_mcpjob"):
            jobs_found = job_admin.activity(*_job_period(history))
            cards += dashboard.job_cards(job_admin.running_now(), jobs_found)
            charts += job_admin.charts(jobs_found)
        context = {**self.admin_site.each_context(request), "title": "MCP transport dashboard",
                   "opts": self.model._meta, "cards": cards, "charts": charts, "sample_count": len(history)}
        return TemplateResponse(request, "admin/mcp_transport/dashboard.html", context)


def _job_period(history) -> tuple:
    """The charted period: since the oldest sample, and at least JOB_PERIOD_MIN."""
    end = timezone.now()
    start = datetime.fromtimestamp(history[0]["t"], tz=dt_timezone.utc) if history else end
    return min(start, end - JOB_PERIOD_MIN), end


def _task_ids_cut(value):
    """A stored message as the session page shows it: every ``taskId`` cut to its first 8
    characters, as the jobs are named on this page (refs.py). A job id is a task's handle, and
    with authorization off its only credential: only the job's own page shows it whole."""
    if isinstance(value, dict):
        return {key: (f"{item[:8]}…" if key == "taskId" and isinstance(item, str) else _task_ids_cut(item))
                for key, item in value.items()}
    if isinstance(value, list):
        return [_task_ids_cut(item) for item in value]
    return value
