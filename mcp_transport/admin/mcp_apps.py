"""The admin's MCP Apps pages (docs/apps.md): the ``ui://`` views this server serves, the tools
that name them and who may see them, and a preview of one in a sandboxed iframe, rendered for
the admin and handed a tool result whose ``structuredContent`` is the view's sample (editable)."""
import json

from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.template.response import TemplateResponse

from ..methods import apps
from ..protocol.errors import ProtocolError


def _who(tool) -> str:
    parts = ([f"permission {tool.permission}"] if tool.permission else []) + \
            ([f"token scopes {' '.join(tool.scopes)}"] if tool.scopes else [])
    return ", ".join(parts) or "every caller"


def rows() -> list:
    """One row per view, by URI."""
    return [{"uri": uri, "title": spec.title or spec.name, "description": spec.description,
             "template": spec.template, "static": spec.static,
             "ui": json.dumps(spec.ui, indent=2) if spec.ui else "",
             "tools": [(tool.name, (tool.meta["ui"].get("visibility") or ["model", "app"]), _who(tool))
                       for tool in sorted(spec.tools, key=lambda tool: tool.name)]}
            for uri, spec in sorted(apps.apps().items())]


def _allowed(request) -> None:
    # Any permission of the app (its index page's rule, as the skills page).
    if not request.user.has_module_perms("mcp_transport"):
        raise PermissionDenied


def apps_view(model_admin, request):
    _allowed(request)
    context = {**model_admin.admin_site.each_context(request), "title": "Apps", "opts": model_admin.model._meta,
               "apps": rows()}
    return TemplateResponse(request, "admin/mcp_transport/apps.html", context)


def preview_view(model_admin, request):
    """The view ``?uri=`` rendered for the admin, in ``<iframe sandbox="allow-scripts">`` (an
    opaque origin: it reaches neither the admin's cookies nor its DOM); app_preview.js plays the
    host. ``?sample=``: the structuredContent to hand it (JSON), else the view's own sample."""
    _allowed(request)
    spec = apps.apps().get(request.GET.get("uri", ""))
    if spec is None:
        raise Http404("No such view.")
    sample, error = _sample(request.GET.get("sample"), spec)
    try:
        html = apps.render(spec, request.user)
    except ProtocolError as exc:
        html, error = "", str(exc)
    context = {**model_admin.admin_site.each_context(request), "title": f"Preview of {spec.uri}",
               "opts": model_admin.model._meta, "app": spec, "html": html, "error": error,
               "sample": sample, "sample_text": json.dumps(sample, indent=2, ensure_ascii=False)}
    return TemplateResponse(request, "admin/mcp_transport/app_preview.html", context)


def _sample(text, spec) -> tuple:
    """(the structuredContent, an error to show): the posted JSON object, else the view's sample."""
    if not text:
        return spec.sample or {}, ""
    try:
        sample = json.loads(text)
    except ValueError as exc:
        return spec.sample or {}, f"The sample is not JSON: {exc}."
    if not isinstance(sample, dict):
        return spec.sample or {}, "The sample must be a JSON object (a structuredContent)."
    return sample, ""
