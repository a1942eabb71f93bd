"""Opaque references to sessions and jobs, for the admin's lists: "session ids shortened in logs
and lists (the full id on the session page only, for users with the permission)" (issue 10).

A session id is today's only credential of a 2025-era session, and a job id is a task's
``taskId``, which alone reads, updates or cancels a 2026-07-28 task where authorization is off
(eras/modern_2026/tasks.py: "bound to the principal ... and to knowing the taskId"). A changelist
carries the primary key in every row's link and action checkbox. The lists carry a reference
instead: the id's first ``PREFIX`` characters (which the list shows as text anyway) and a keyed
HMAC of the whole id (Django's ``salted_hmac``, keyed by ``SECRET_KEY``, salted per kind so that
a session's reference never names a job), so the HTML holds no more of the id than its text
does, and the rest cannot be derived from it. The server finds an object back by the prefix (a
range of the primary key's index) and the tag. Nothing is stored: a reference is computed from
the id wherever one is needed (the jobs list links to sessions it never loads). A new
``SECRET_KEY`` changes the references (an old link names nothing; ``SECRET_KEY_FALLBACKS`` still
resolve).

``ByReference`` is the ModelAdmin side: row links, action checkboxes and the object's pages by
reference, the popup list off.
"""
import hmac
from functools import reduce
from operator import or_

from django.conf import settings
from django.contrib.admin import helpers
from django.contrib.admin.utils import quote, unquote
from django.contrib.admin.views.main import ChangeList
from django.db.models import Q
from django.http import Http404
from django.urls import reverse
from django.utils.crypto import salted_hmac

#: Characters of the id a reference starts with: what the lists show.
PREFIX = 8
#: Never in a session or job id (base64url), so a reference is never taken for an id.
SEPARATOR = "."
#: Objects read at most to find one reference: ids that share a prefix are rare (48 random bits).
_CANDIDATES = 100


def is_ref(value: str) -> bool:
    return SEPARATOR in value


def _prefix(ref: str) -> str:
    """The id prefix a reference starts with, or "" when it is not PREFIX characters long: a
    shorter one (say "a.x") would make the lookup read a share of every row of the table."""
    prefix = ref.partition(SEPARATOR)[0]
    return prefix if len(prefix) == PREFIX else ""


class References:
    """The references of one kind of object (its own salt)."""

    def __init__(self, kind: str):
        self.kind = kind
        self._salt = f"mcp_transport.admin.{kind}-reference"

    def _tag(self, object_id: str, secret) -> str:
        return salted_hmac(self._salt, object_id, secret=secret, algorithm="sha256").hexdigest()[:24]

    def ref(self, object_id: str) -> str:
        """The reference the admin's lists use for the object with this id."""
        return f"{object_id[:PREFIX]}{SEPARATOR}{self._tag(object_id, settings.SECRET_KEY)}"

    def names(self, ref: str, object_id: str) -> bool:
        """Whether ``ref`` is a reference to ``object_id`` (under the key or a fallback)."""
        prefix, _, tag = ref.partition(SEPARATOR)
        if prefix != object_id[:PREFIX]:
            return False
        secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
        return any(hmac.compare_digest(tag, self._tag(object_id, secret)) for secret in secrets)

    def find(self, queryset, value):
        """The object of ``queryset`` that ``value`` names (a reference, or a full id), or None;
        one query."""
        if not is_ref(value):
            return queryset.filter(pk=value).first()
        if not _prefix(value):
            return None
        return next((found for found in queryset.filter(pk__startswith=_prefix(value))[:_CANDIDATES]
                     if self.names(value, found.pk)), None)

    def select(self, queryset, values) -> dict:
        """``{value: object}`` for each of ``values`` that names an object of ``queryset``, as a
        reference or, typed or posted by someone who has it, as a full id; one query for all."""
        refs = [value for value in values if is_ref(value)]
        ids = {value for value in values if not is_ref(value)}
        prefixes = {_prefix(ref) for ref in refs} - {""}
        if not ids and not prefixes:
            return {}
        condition = reduce(or_, (Q(pk__startswith=prefix) for prefix in prefixes), Q(pk__in=ids))
        found = {}
        for row in queryset.filter(condition)[:len(ids) + _CANDIDATES * len(prefixes)]:
            if row.pk in ids:
                found[row.pk] = row
            found.update((ref, row) for ref in refs if self.names(ref, row.pk))
        return found

    def resolve(self, queryset, values) -> list:
        """The primary keys of ``queryset``'s objects that ``values`` name (as ``select``)."""
        return list({row.pk for row in self.select(queryset.only("pk"), values).values()})


SESSIONS = References("session")
JOBS = References("job")


def session_ref(session_id: str) -> str:
    return SESSIONS.ref(session_id)


def job_ref(job_id: str) -> str:
    return JOBS.ref(job_id)


def admin_url(references: References, model, object_id: str, view="change") -> str:
    """An object's admin page (or another of its views), by reference, quoted as the admin
    quotes primary keys (a prefix may hold "_3A", which the view would read back as ":")."""
    return reverse(f"admin:mcp_transport_{model._meta.model_name}_{view}",
                   args=[quote(references.ref(object_id))])


class ReferenceChangeList(ChangeList):
    """Rows link to their object by reference, never by id."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # A popup list (``?_popup=1``) would hand each row's primary key to its opener in the
        # HTML; no form picks a session or a job that way.
        self.is_popup = False

    def url_for_result(self, result):
        return admin_url(self.model_admin.references, self.model, result.pk)


class ByReference:
    """For ModelAdmins (with paging.FastListMixin) whose lists name rows by reference: the
    row links, the action checkboxes, and the object's own views, which take a reference (the
    lists' links) or a full id (typed by someone who has it)."""

    references: References
    changelist_class = ReferenceChangeList

    def get_changelist(self, request, **kwargs):
        return self.changelist_class

    def object_url(self, object_id, view="change") -> str:
        return admin_url(self.references, self.model, object_id, view)

    def action_value(self, obj):
        return self.references.ref(obj.pk)  # the list's checkboxes: no id in its HTML

    def response_action(self, request, queryset):
        # The checkboxes post references: the actions (Django's ``pk__in``) get the ids.
        posted = request.POST.copy()
        posted.setlist(helpers.ACTION_CHECKBOX_NAME, self.references.resolve(
            self.model._default_manager.all(), request.POST.getlist(helpers.ACTION_CHECKBOX_NAME)))
        request.POST = posted
        return super().response_action(request, queryset)

    def object_or_404(self, queryset, object_id):
        """The object a URL names: by reference (the lists' links) or by id."""
        # object_id comes quoted, as the admin quotes primary keys in URLs ("_" in the ids).
        found = self.references.find(queryset, unquote(object_id))
        if found is None:
            raise Http404(f"No {self.opts.verbose_name} matches the given query.")
        return found

    def change_view(self, request, object_id, form_url="", extra_context=None):
        # A reference that names nothing (a forged tag, an old key) is a 404, as on the
        # object's other views, rather than Django's redirect to the index.
        found = request._mcp_object = self.object_or_404(self.change_queryset(request), object_id)
        context = {**(extra_context or {}), **self.change_context(request, found)}
        return super().change_view(request, object_id, form_url, context)

    def change_queryset(self, request):
        """Where the object's page finds it."""
        return self.get_queryset(request)

    def change_context(self, request, obj) -> dict:
        """What the object's page shows besides its fields."""
        return {}

    def get_object(self, request, object_id, from_field=None):
        found = getattr(request, "_mcp_object", None)  # change_view loaded it already
        if found is not None and from_field is None and object_id in (found.pk, self.references.ref(found.pk)):
            return found
        if from_field is None and is_ref(object_id):
            return self.references.find(self.get_queryset(request), object_id)
        return super().get_object(request, object_id, from_field)
