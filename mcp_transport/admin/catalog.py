"""The admin's tool catalog (docs/discovery.md): every registered tool with who may find it, what
one chosen user may find (search shows a caller only those), and a switch that takes a tool off
at runtime on every process (state/switches.py: it leaves every list and search, and a call of
it is refused as unknown) and back on, telling every client (notifications/tools/list_changed). Each switch is a row of the audit trail (the calls log's
state-changing calls, running/audit.py), under the operator's name."""
import time

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.core.exceptions import PermissionDenied
from django.http import HttpResponseRedirect
from django.template.response import TemplateResponse
from django.urls import reverse
from django.utils import timezone

from ..auth import Principal, permitted
from ..methods import notify
from ..methods.registry import registry
from ..models import McpCall
from ..state import switches

#: The calls log's method of a switch (an admin action, not a JSON-RPC method).
SWITCH_METHOD = "admin/tools/switch"


def rows(user=None) -> list:
    """One row per tool, by name; ``found``: whether ``user`` may find it (its permissions and
    its toolset's checks, token scopes aside: a token's are per token)."""
    principal = None if user is None else Principal(key=f"user:{user.pk}", user_id=user.pk, user=user)
    off = switches.off()
    return [{"name": name, "description": (spec.description or "").split("\n", 1)[0], "who": _who(spec),
             "pinned": spec.pinned, "off": name in off,
             "found": None if user is None else (name not in off and permitted(spec, principal))}
            for name, spec in sorted(registry.tools.items())]


def _who(spec) -> str:
    parts = ([f"permission {spec.permission}"] if spec.permission else []) + \
            ([f"token scopes {' '.join(spec.scopes)}"] if spec.scopes else []) + \
            (["its toolset's per-user check"] if spec.visible is not None else [])
    return ", ".join(parts) or "every caller"


def catalog_view(model_admin, request):
    # Any permission of the app to look (its index page's rule); switching is the superuser's.
    if not request.user.has_module_perms("mcp_transport"):
        raise PermissionDenied
    if request.method == "POST":
        return _switch(request)
    chosen = _chosen_user(request.GET.get("user", ""))
    context = {**model_admin.admin_site.each_context(request), "title": "Tool catalog",
               "opts": model_admin.model._meta, "tools": rows(chosen), "chosen": chosen,
               "username": request.GET.get("user", ""), "can_switch": request.user.is_superuser}
    return TemplateResponse(request, "admin/mcp_transport/catalog.html", context)


def _chosen_user(username: str):
    if not username:
        return None
    return get_user_model()._default_manager.filter(**{get_user_model().USERNAME_FIELD: username}).first()


def _switch(request):
    if not request.user.is_superuser:
        raise PermissionDenied
    name, on = request.POST.get("tool", ""), request.POST.get("on") == "1"
    if name not in registry.tools:
        messages.error(request, f"There is no tool {name!r}.")
    else:
        started = time.monotonic()
        switches.switch(name, on)
        _audit(request, name, on, started)
        notify.list_changed_sync("tools")  # clients that keep the list read it again
        messages.success(request, f"{name} is switched {'on' if on else 'off'} on every process.")
    return HttpResponseRedirect(reverse("admin:mcp_transport_tools"))


def _audit(request, name: str, on: bool, started: float) -> None:
    """The switch's row in the calls log, among the state-changing calls (the audit trail)."""
    McpCall.objects.create(
        started_at=timezone.now(), era="admin", method=SWITCH_METHOD, target=name,
        principal=f"user:{request.user.pk}", status=McpCall.Outcome.OK, changes_state=True,
        duration_ms=(time.monotonic() - started) * 1000, arguments={"on": on},
        client_address=request.META.get("REMOTE_ADDR", ""))
