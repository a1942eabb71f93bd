"""The admin's list of the skills this server publishes (SEP-2640, docs/skills.md): read only,
as they were found at start-up or registered in code (methods/skill_catalog.py), with who may
see each, and every file with its size and digest (what skills/list tells clients)."""
from django.core.exceptions import PermissionDenied
from django.template.response import TemplateResponse

from ..methods.registry import registry


def rows() -> list:
    """One row per skill, by URI, for the page's table."""
    return [{"uri": spec.uri, "name": spec.name, "description": spec.frontmatter["description"],
             "origin": spec.origin, "who": _who(spec), "files": list(spec.files.values()),
             "total_bytes": spec.total_bytes}
            for _, spec in sorted(registry.skills.items())]


def _who(spec) -> str:
    parts = ([f"permission {spec.permission}"] if spec.permission else []) + \
            ([f"token scopes {' '.join(spec.scopes)}"] if spec.scopes else [])
    return ", ".join(parts) or "every caller"


def skills_view(model_admin, request):
    # Any permission of the app (its index page's rule): the list says what clients are told.
    if not request.user.has_module_perms("mcp_transport"):
        raise PermissionDenied
    context = {**model_admin.admin_site.each_context(request), "title": "Skills", "opts": model_admin.model._meta,
               "skills": rows()}
    return TemplateResponse(request, "admin/mcp_transport/skills.html", context)
