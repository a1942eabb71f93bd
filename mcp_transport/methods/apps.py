"""MCP Apps (``io.modelcontextprotocol/ui``, SEP-1865) the Django way: a view is a Django
template, rendered at ``resources/read`` as one whole HTML5 document whose CSS and JavaScript
(the app's static files) are inlined, so that the host's default CSP ("default-src 'none';
script-src 'self' 'unsafe-inline'; ...") holds; a tool names its view with ``@tool(ui=...)``::

    from mcp_transport import app, tool

    app("ui://library/book-card", template="library/apps/book_card.html",
        static=["library/apps/book_card.css", "library/apps/book_card.js"], prefers_border=True)

    @tool(ui="ui://library/book-card", permission="library.view_book")
    def show_book(book_id: int) -> Book: ...

The view is rendered with the caller's user and language, never with a call's arguments
("hosts fetch the view in parallel with the call"): the data comes to it as the tool's
``structuredContent``, through the host. A ``ui://`` resource is listed and read exactly by
those who may use one of the tools naming it (auth.may_use: the same permission and scopes).
"""
import logging
from dataclasses import dataclass, field
from typing import Optional

from django.conf import settings
from django.contrib.staticfiles import finders
from django.template import TemplateDoesNotExist
from django.template.loader import get_template, render_to_string
from django.utils import translation
from django.utils.safestring import mark_safe

from ..auth import may_use
from ..protocol import apps as wire
from ..protocol.errors import ErrorCode, ProtocolError
from . import extensions
from .registry import ResourceSpec, registry

logger = logging.getLogger(__name__)


@dataclass
class AppSpec(ResourceSpec):
    """A ``ui://`` resource rendered from a Django template."""

    template: str = ""
    #: Static files (app-relative paths, found as ``{% static %}`` finds them): .css ones are
    #: inlined in <style>, the others in <script>, in this order.
    static: tuple = ()
    #: Its ``_meta.ui`` (UIResourceMeta: csp, permissions, domain, prefersBorder).
    ui: dict = field(default_factory=dict)
    #: A tool result's ``structuredContent`` the admin previews it with (admin/mcp_apps.py).
    sample: Optional[dict] = None
    #: It asks the client nothing: its Context is only for the caller's user.
    may_send = False
    #: Rendered for its user: a 2026-07-28 answer is always cacheScope "private".
    per_user = True

    def describe(self) -> dict:
        entry = super().describe()
        if self.ui:
            entry["_meta"] = {"ui": self.ui}
        return entry

    def to_contents(self, uri: str, value) -> list:
        item = {"uri": uri, "mimeType": wire.MIME_TYPE, "text": value}
        if self.ui:
            item["_meta"] = {"ui": self.ui}
        return [item]

    def __post_init__(self):
        self.func = lambda ctx: render(self, ctx.user)
        self.visible = lambda principal: usable_by(self, principal)

    @property
    def tools(self) -> list:
        """The tools that name this view."""
        return [spec for spec in registry.tools.values() if tool_view(spec) == self.uri]


def tool_view(spec) -> Optional[str]:
    """The ``ui://`` URI a tool names (its ``_meta.ui.resourceUri``), or None."""
    ui = (spec.meta or {}).get("ui")
    return ui.get("resourceUri") if isinstance(ui, dict) else None


def app(uri: str, *, template: str, static=(), name: Optional[str] = None, title: Optional[str] = None,
        description: Optional[str] = None, csp: Optional[dict] = None, permissions: Optional[dict] = None,
        domain: Optional[str] = None, prefers_border: Optional[bool] = None, sample: Optional[dict] = None) -> AppSpec:
    """Register the view ``uri`` (``ui://...``), rendered from ``template``. ``csp`` declares
    the external origins it needs ("Host MUST NOT allow undeclared domains"), ``permissions``
    the browser features it asks for, ``domain`` a dedicated sandbox origin (host-specific) and
    ``prefers_border`` whether the host draws a border: UIResourceMeta, as the spec defines it.
    ``sample``: a ``structuredContent`` the admin's preview hands the view."""
    wire.tool_meta(uri)  # refuses a URI that is not ui://
    ui = {key: value for key, value in (("csp", csp), ("permissions", permissions), ("domain", domain),
                                        ("prefersBorder", prefers_border)) if value is not None}
    spec = AppSpec(uri=uri, func=None, name=name or uri.removeprefix(wire.SCHEME), title=title,
                   description=description, mime_type=wire.MIME_TYPE, context_param="ctx",
                   template=template, static=tuple(static), ui=ui, sample=sample)
    registry.resources[uri] = spec
    return spec


def usable_by(spec: AppSpec, principal) -> bool:
    """"Listed and readable exactly by those who may use one of its tools"."""
    return any(may_use(tool, principal) for tool in spec.tools)


def apps() -> dict:
    """The registered views, by URI."""
    return {uri: spec for uri, spec in registry.resources.items() if isinstance(spec, AppSpec)}


def render(spec: AppSpec, user, extra: Optional[dict] = None) -> str:
    """The view's whole document, for ``user``, in the user's language (a ``language``
    attribute of the user, else LANGUAGE_CODE). A template that fails is logged and answered
    as an error that says so, without its traceback."""
    language = getattr(user, "language", None) or settings.LANGUAGE_CODE
    try:
        with translation.override(language):
            return render_to_string(spec.template, {"user": user, "app": spec, **inlined(spec), **(extra or {})})
    except Exception:
        logger.exception("The view %s (template %s) could not be rendered", spec.uri, spec.template)
        raise ProtocolError(f"The view {spec.uri} could not be rendered; the server's log says why.",
                            code=ErrorCode.INTERNAL_ERROR, data={"uri": spec.uri}) from None


def inlined(spec: AppSpec) -> dict:
    """``app_styles`` and ``app_scripts``: the contents of its static files, for the base
    template to inline (a closing tag inside one is escaped, so it cannot end its element)."""
    styles, scripts = [], []
    for path in spec.static:
        with open(finders.find(path), encoding="utf-8") as file:
            text = file.read()
        if path.endswith(".css"):
            styles.append(mark_safe(_escape_end(text, "</style")))
        else:
            scripts.append(mark_safe(_escape_end(text, "</script")))
    return {"app_styles": styles, "app_scripts": scripts}


def _escape_end(text: str, tag: str) -> str:
    lowered, out, start = text.lower(), [], 0
    while (at := lowered.find(tag, start)) >= 0:
        out.append(text[start:at] + "<\\/" + text[at + 2:at + len(tag)])
        start = at + len(tag)
    return "".join(out) + text[start:]


def problems() -> list:
    """What the system checks refuse (checks.py): a view whose template or static file is
    missing, or whose ``_meta.ui`` is malformed; a tool naming a ``ui://`` view that is not one."""
    found = []
    for uri, spec in apps().items():
        try:
            get_template(spec.template)
        except TemplateDoesNotExist:
            found.append(f"The view {uri} names the template {spec.template!r}, which no template loader finds.")
        found += [f"The view {uri} names the static file {path!r}, which no static files finder finds."
                  for path in spec.static if not finders.find(path)]
        found += [f"The view {uri}'s _meta.ui: {error}" for error in wire.resource_meta_errors(spec.ui)]
    views = apps()
    found += [f"The tool {name} names the view {tool_view(spec)}, which no app() registers."
              for name, spec in registry.tools.items() if tool_view(spec) and tool_view(spec) not in views]
    return found


# "Servers and clients negotiate MCP Apps through the extensions capability mechanism": declared
# in both eras while a view is registered.
extensions.declare(wire.EXTENSION, lambda: {"mimeTypes": [wire.MIME_TYPE]} if apps() else None)
