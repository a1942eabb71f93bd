"""The jobs admin: background tool calls (models.McpJob) with a live progress bar, and cancel.

Cancel goes through ``jobs.cancel()``, the path of ``notifications/cancelled``: the row turns
``cancelled``, the ``cancel`` control message reaches the worker's cooperative flag wherever it
runs, and a job still queued is revoked in Celery.

The progress bars of running jobs poll ``progress/`` (a JSON view, one query for the rows on
the page, named by reference as every job on the admin's lists and pages: refs.py) every
second; the worker writes a running job's progress to its row at most every
``worker.PROGRESS_WRITE_INTERVAL`` seconds, so that is the bar's resolution.
"""
import json
from datetime import timedelta

from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db.models import (Avg, Case, Count, DurationField, ExpressionWrapper, F, IntegerField, OuterRef, Subquery,
                              Value, When)
from django.http import HttpResponseNotAllowed, HttpResponseRedirect, JsonResponse
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html

from ..running import jobs
from ..running.jobs.rows import is_2026_job
from ..models import McpCall, McpJob, McpSession
from . import refs
from .charts import Series, line_chart
from .paging import CappedPaginator, FastListMixin

Status = McpJob.Status
STATUS_COLOURS = {Status.QUEUED: "#6b6b6b", Status.WORKING: "#0072B2", Status.INPUT_REQUIRED: "#b26b00",
                  Status.COMPLETED: "#1b7f3b", Status.FAILED: "#ba2121", Status.CANCELLED: "#8a4f7d"}
#: Rows the progress view answers for at once (a page of the list).
PROGRESS_BATCH = 200
#: Buckets of the dashboard's job charts, and how long before a bucket a charted job may
#: have been created (the query filters on the indexed created_at).
JOB_BUCKETS = 40
LONGEST_JOB = timedelta(days=1)


def progress_state(job) -> dict:
    """What a progress bar shows of a job (the JSON view sends this; the list renders it).

    A running job without a total is *indeterminate*: its bar moves without claiming a share
    ("total ... MAY be omitted if unknown" -- spec 2025-11-25 basic/utilities/progress)."""
    percent = None
    if job.progress is not None and job.total:
        percent = max(0.0, min(100.0, job.progress / job.total * 100))
    elif job.status == Status.COMPLETED:
        percent = 100.0
    state = {"status": job.status, "label": job.get_status_display(), "colour": STATUS_COLOURS.get(job.status, "#777"),
             "active": job.status in McpJob.ACTIVE, "progress": job.progress, "total": job.total,
             "percent": percent, "message": job.message, "duration": _seconds(job.duration),
             "indeterminate": percent is None and job.status in (Status.WORKING, Status.INPUT_REQUIRED)}
    state["text"] = _progress_text(state)
    return state


def _seconds(value) -> str:
    if value is None:
        return "–"
    return f"{value:.1f} s" if value < 120 else f"{value / 60:.1f} min"


def _progress_text(state) -> str:
    """The bar's label: "3/10"; "3 (no total)" while indeterminate; "done" for a completed job
    that never said how far it was; "queued" before a worker takes it."""
    done = None if state["progress"] is None else f"{state['progress']:g}"
    if state["total"] and done is not None:
        return f"{done}/{state['total']:g}"
    if state["status"] == Status.QUEUED:
        return "queued"
    if state["indeterminate"]:
        return "working, no total" if done is None else f"{done} (no total)"
    if state["status"] == Status.COMPLETED:
        return "done" if done is None else f"done ({done})"
    return done or "–"


def job_url(job_id, view="change") -> str:
    """A job's admin page (or its cancel view), by reference: a job id is a task's handle."""
    return refs.admin_url(refs.JOBS, McpJob, job_id, view)


def progress_bar_html(job):
    """A bar that jobs.js keeps moving while the job is active (it names the job by reference)."""
    state = progress_state(job)
    width = state["percent"] if state["percent"] is not None else 0
    return format_html(
        '<span class="mcp-progress-cell" data-job="{}" data-active="{}" data-url="{}">'
        '<span class="mcp-progress{}" role="progressbar" aria-valuemin="0" aria-valuemax="100"{}>'
        '<span style="width:{}%"></span></span> <small class="mcp-progress-text">{}</small></span>',
        refs.job_ref(job.id), "1" if state["active"] else "0", reverse("admin:mcp_transport_mcpjob_progress"),
        " mcp-indeterminate" if state["indeterminate"] else "",
        format_html(' aria-valuenow="{}"', f"{width:.0f}") if state["percent"] is not None else "",
        f"{width:.1f}", state["text"])


def moment_html(value, seconds=False):
    """A date and time for list columns, which wraps between the two in a narrow window."""
    local = timezone.localtime(value)
    return format_html('<span class="mcp-nowrap">{}</span> <span class="mcp-nowrap">{}</span>',
                       local.strftime("%Y-%m-%d"), local.strftime("%H:%M:%S" if seconds else "%H:%M"))


@admin.register(McpJob)
class McpJobAdmin(refs.ByReference, FastListMixin, admin.ModelAdmin):
    list_display = ("short_id", "tool", "status_badge", "progress_bar", "duration_text", "session_link", "user",
                    "created", "attempts")
    list_display_links = ("short_id",)
    references = refs.JOBS
    list_filter = ("status", "is_task")
    search_fields = ("^id", "tool", "^session_id")
    search_help_text = "Job id prefix, tool name or session id prefix."
    list_select_related = ("user",)
    list_per_page = 100
    paginator = CappedPaginator
    show_full_result_count = False
    actions = ("cancel_jobs",)
    readonly_fields = ("id", "tool", "status", "progress_bar", "duration_text", "message", "error", "session_link",
                       "user", "request_id", "stream_key", "is_task", "ttl_ms", "celery_task_id", "attempts",
                       "worker", "created_at", "started_at", "finished_at", "pretty_arguments", "pretty_result")
    fieldsets = (
        (None, {"fields": ("id", "tool", "status", "progress_bar", "duration_text", "message", "error")}),
        ("Call", {"fields": ("session_link", "user", "request_id", "stream_key", "is_task", "ttl_ms",
                             "pretty_arguments", "pretty_result")}),
        ("Worker", {"fields": ("celery_task_id", "attempts", "worker", "created_at", "started_at", "finished_at")}),
    )

    class Media:
        css = {"all": ("mcp_transport/admin.css",)}
        js = ("mcp_transport/jobs.js",)

    @admin.display(description="job", ordering="id")
    def short_id(self, obj):
        return format_html("<code>{}…</code>", obj.id[:8])  # the full id (a task id) on the job's page

    @admin.display(description="status", ordering="status")
    def status_badge(self, obj):
        state = progress_state(obj)
        return format_html('<span class="mcp-badge" data-job-status="{}" style="background:{}">{}</span>',
                           refs.job_ref(obj.id), state["colour"], state["label"])

    @admin.display(description="progress")
    def progress_bar(self, obj):
        return progress_bar_html(obj)

    @admin.display(description="duration")
    def duration_text(self, obj):
        return format_html('<span data-job-duration="{}">{}</span>', refs.job_ref(obj.id), _seconds(obj.duration))

    @admin.display(description="session", ordering="session_id")
    def session_link(self, obj):
        if is_2026_job(obj):
            # A 2026-07-28 call has no session (its session_id is only its events' namespace):
            # the job links to its call in the calls log instead, when the log kept it.
            if getattr(obj, "call_pk", None) is None:
                return format_html('<span title="{}">–</span>', "2026-07-28: no session")
            url = reverse("admin:mcp_transport_mcpcall_change", args=[obj.call_pk])
            return format_html('<a href="{}">call {}</a>', url, obj.call_pk)
        # By reference (refs.py: no session id in the list's HTML).
        url = refs.admin_url(refs.SESSIONS, McpSession, obj.session_id)
        return format_html('<a href="{}"><code>{}…</code></a>', url, obj.session_id[:8])

    @admin.display(description="created", ordering="created_at")
    def created(self, obj):
        return moment_html(obj.created_at, seconds=True)

    @admin.display(description="arguments")
    def pretty_arguments(self, obj):
        return format_html('<pre class="mcp-json">{}</pre>', json.dumps(obj.arguments, indent=2, ensure_ascii=False))

    @admin.display(description="result")
    def pretty_result(self, obj):
        if obj.result is None:
            return "–"
        return format_html('<pre class="mcp-json">{}</pre>', json.dumps(obj.result, indent=2, ensure_ascii=False))

    def get_queryset(self, request):
        # The first call of each job (its tools/call; retries of a 2026-07-28 call come later).
        first_call = McpCall.objects.filter(job_id=OuterRef("pk")).order_by("started_at").values("pk")[:1]
        return super().get_queryset(request).annotate(call_pk=Subquery(first_call))

    def has_add_permission(self, request):
        return False  # jobs begin with a tools/call

    def has_delete_permission(self, request, obj=None):
        return False  # a deleted row would leave its worker running: cancel instead

    def change_context(self, request, obj) -> dict:
        return {"cancel_url": job_url(obj.pk, "cancel"),
                "show_save": False, "show_save_and_continue": False, "show_save_and_add_another": False}

    @admin.action(description="Cancel selected jobs (as notifications/cancelled)", permissions=["change"])
    def cancel_jobs(self, request, queryset):
        active = list(queryset.filter(status__in=McpJob.ACTIVE).values_list("pk", flat=True))
        stop = jobs.Stop("admin: cancel", *operator(request))
        cancelled = sum(jobs.cancel(job_id, stop=stop) for job_id in active)
        self.message_user(request, f"Cancelled {cancelled} job(s).", messages.SUCCESS)

    def get_urls(self):
        wrap = self.admin_site.admin_view
        return [
            path("progress/", wrap(self.progress_view), name="mcp_transport_mcpjob_progress"),
            path("<path:object_id>/cancel/", wrap(self.cancel_view), name="mcp_transport_mcpjob_cancel"),
            *super().get_urls(),
        ]

    def progress_view(self, request):
        """``?id=<ref>&id=...``: the progress state of each job, in one query, under the
        reference (or full id) it was asked by: the bars name jobs by reference."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        wanted = request.GET.getlist("id")[:PROGRESS_BATCH]
        rows = refs.JOBS.select(McpJob.objects.only(
            "id", "status", "progress", "total", "message", "started_at", "finished_at"), wanted)
        return JsonResponse({"jobs": {value: progress_state(job) for value, job in rows.items()}})

    def cancel_view(self, request, object_id):
        if request.method != "POST":
            return HttpResponseNotAllowed(["POST"])
        job = self.object_or_404(McpJob.objects.all(), object_id)
        if not self.has_change_permission(request, job):
            raise PermissionDenied
        done = jobs.cancel(job.pk, stop=jobs.Stop("admin: cancel", *operator(request)))
        self.message_user(request, "Job cancelled." if done else "The job had already ended.",
                          messages.SUCCESS if done else messages.WARNING)
        return HttpResponseRedirect(job_url(job.pk))


def operator(request) -> tuple:
    """Who acts in the admin, as the audit trail names a caller: (principal key, address)."""
    return f"user:{request.user.pk}", request.META.get("REMOTE_ADDR", "")


# -- the dashboard's job signals ------------------------------------------------------------

def _edges(start, end, buckets=JOB_BUCKETS) -> list:
    step = (end - start) / buckets
    return [start + step * index for index in range(buckets + 1)]


def activity(start, end) -> dict:
    """Jobs finished between ``start`` and ``end`` (datetimes), by bucket, in one GROUP BY
    query: how many per minute by outcome, and their mean run time and queue wait."""
    edges = _edges(start, end)
    run = ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
    wait = ExpressionWrapper(F("started_at") - F("created_at"), output_field=DurationField())
    bucket = Case(*[When(finished_at__lte=high, then=Value(index)) for index, high in enumerate(edges[1:])],
                  output_field=IntegerField())
    rows = (McpJob.objects.filter(created_at__gte=start - LONGEST_JOB, finished_at__gt=edges[0],
                                  finished_at__lte=edges[-1], status__in=McpJob.TERMINAL)
            .annotate(bucket=bucket).values("bucket", "status").order_by()
            .annotate(n=Count("pk"), started=Count("started_at"), run=Avg(run), wait=Avg(wait)))
    minutes = (edges[1] - edges[0]).total_seconds() / 60 or 1
    counts = {status: [0] * JOB_BUCKETS for status in McpJob.TERMINAL}
    timing = {"run": [[] for _ in range(JOB_BUCKETS)], "wait": [[] for _ in range(JOB_BUCKETS)]}
    for row in rows:
        counts[row["status"]][row["bucket"]] += row["n"]
        for name in timing:
            if row[name] is not None:
                timing[name][row["bucket"]].append((row[name].total_seconds(), row["started"]))
    return {"times": [edge.timestamp() for edge in edges[1:]],
            "per_minute": {status: [n / minutes for n in counts[status]] for status in McpJob.TERMINAL},
            "finished": {status: sum(counts[status]) for status in McpJob.TERMINAL},
            "run": [_weighted_mean(parts) for parts in timing["run"]],
            "wait": [_weighted_mean(parts) for parts in timing["wait"]],
            "mean_run": _weighted_mean(sum(timing["run"], [])),
            "mean_wait": _weighted_mean(sum(timing["wait"], []))}


def _weighted_mean(parts):
    """The mean of (mean, weight) pairs; None without weight."""
    weight = sum(count for _, count in parts)
    return sum(mean * count for mean, count in parts) / weight if weight else None


def running_now() -> int:
    return McpJob.objects.filter(status__in=McpJob.ACTIVE).count()


def charts(found: dict) -> list:
    times = found["times"]
    colours = {Status.COMPLETED: "#009E73", Status.FAILED: "#D55E00", Status.CANCELLED: "#CC79A7"}
    return [
        ("Jobs finished per minute", line_chart(times, [
            Series(str(status.label).lower(), found["per_minute"][status], colours[status]) for status in McpJob.TERMINAL])),
        ("Job latency (mean per bucket)", line_chart(times, [Series("run time", found["run"]),
                                                             Series("queue wait", found["wait"])], " s")),
    ]
