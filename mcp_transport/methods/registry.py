"""Registration of tools, resources, prompts and completions.

    from mcp_transport import tool, Context

    @tool
    def echo(text: str) -> str:
        \"\"\"Return text unchanged.\"\"\"
        return text

The input schema comes from the signature (type hints, defaults, ``Annotated[..., Field()]``)
and the docstring's ``Args:`` section, through pydantic. The output schema comes from the
return annotation: an object type is used as is, anything else is wrapped as
``{"result": ...}`` as the official SDKs do. A parameter annotated ``Context`` is injected.
Modules named ``mcp_tools`` in installed apps are imported at startup (apps.py), as admin.py is.
"""
import functools
import inspect
import json
import re
import typing
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import jsonschema
import pydantic

from ..auth import access
from ..protocol import apps, storable
from . import content
from .context import Context
from .database_time import DEFAULT_STATEMENT_TIMEOUT
from .specs import CountedDict
from ..state import rates

_NOT_STRUCTURED = (type(None), Any, content.ToolResult, list, dict)


class ToolError(Exception):
    """Raise from a tool to return ``isError: true`` with this message as its text."""


class ArgumentError(Exception):
    """The client's arguments do not satisfy the tool's input schema."""


_ARGS_HEADING = re.compile(r"^(?:Args|Arguments|Parameters):\s*$", re.M)


def parse_docstring(doc: Optional[str]) -> tuple:
    """(description, {param: description}) from a Google-style docstring."""
    if not doc:
        return None, {}
    head, *sections = _ARGS_HEADING.split(inspect.cleandoc(doc), maxsplit=1)
    params, indent, last = {}, None, None
    for line in (sections[0] if sections else "").splitlines():
        if not line.strip():
            continue
        if not line.startswith((" ", "\t")):
            break  # the next section (Returns:, Raises:) starts at the left margin
        depth = len(line) - len(line.lstrip())
        match = re.match(r"^(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line.strip())
        if match and (indent is None or depth <= indent):
            indent, last = depth, match.group(1)
            params[last] = match.group(2).strip()
        elif last is not None and depth > indent:
            params[last] = f"{params[last]} {line.strip()}".strip()  # a continuation line
        else:
            last = None
    return head.strip() or None, {name: text for name, text in params.items() if text}


def _context_param(func, hints) -> Optional[str]:
    for name, hint in hints.items():
        if name != "return" and isinstance(hint, type) and issubclass(hint, Context):
            return name
    return None


def _arguments_model(name, func, hints, context_param, param_docs):
    fields = {}
    for param in inspect.signature(func).parameters.values():
        if param.name == context_param or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        annotation = hints.get(param.name, Any)
        default = ... if param.default is param.empty else param.default
        # Only pass a description the docstring has: description=None would erase the one of an
        # ``Annotated[..., Field(description=...)]``.
        described = pydantic.Field(default, **({"description": param_docs[param.name]}
                                               if param.name in param_docs else {}))
        fields[param.name] = (annotation, described)
    return pydantic.create_model(f"{name}Arguments", **fields)


def _lift_defs(schema):
    defs = schema.pop("$defs", None)
    return defs or {}


def _output_schema(hint):
    """(schema, adapter, wraps) for a return annotation; (None, None, False) when unstructured."""
    if hint is inspect.Signature.empty or hint in _NOT_STRUCTURED or typing.get_origin(hint) in (list, dict) \
            and dict in typing.get_args(hint):
        return None, None, False
    adapter = pydantic.TypeAdapter(hint)
    schema = adapter.json_schema(mode="serialization")
    if schema.get("type") == "object":
        return schema, adapter, False
    defs = _lift_defs(schema)
    wrapped = {"type": "object", "properties": {"result": schema}, "required": ["result"]}
    if defs:
        wrapped["$defs"] = defs
    return wrapped, adapter, True


def _error_text(exc: pydantic.ValidationError, whole: str = "arguments") -> str:
    parts = []
    for error in exc.errors(include_url=False):
        where = ".".join(str(p) for p in error["loc"]) or whole
        parts.append(f"{where}: {error['msg']}")
    return "; ".join(parts)


@dataclass
class ToolSpec:
    name: str
    func: Callable
    description: Optional[str] = None
    title: Optional[str] = None
    input_schema: dict = field(default_factory=dict)
    output_schema: Optional[dict] = None
    annotations: Optional[dict] = None
    meta: Optional[dict] = None
    #: Name of the parameter that receives the Context, if any.
    context_param: Optional[str] = None
    #: Run as a background (Celery) job instead of inline (running/jobs/, running/worker/).
    background: bool = False
    #: Celery options of the job: ``queue``, ``soft_time_limit``, ``time_limit``, ``max_retries``.
    job_options: dict = field(default_factory=dict)
    #: The Celery task a job calls, when the tool exposes one (``task_tool``); else ``func`` runs.
    celery_task: Any = None
    #: MCP tasks: "optional" or "required" for background tools, None ("forbidden") otherwise.
    task_support: Optional[str] = None
    arguments_model: Any = None
    return_adapter: Any = None
    wraps_result: bool = False
    #: Who may see and call it (auth.may_use): a Django permission "app.codename", and token scopes.
    permission: Optional[str] = None
    scopes: tuple = ()
    #: Its string arguments reach a database as text (the model toolsets' tools): one holding
    #: NUL or a lone surrogate is refused with -32602 before the tool runs (protocol/storable.py).
    database_text: bool = False
    #: ``visible(principal) -> bool``: a check of its own, besides ``permission`` (auth.may_use);
    #: it runs on the event loop, so it must not query the database.
    visible: Optional[Callable] = None
    #: Seconds each database statement of an inline call may run (database_time.py), None: no bound.
    statement_timeout: Any = DEFAULT_STATEMENT_TIMEOUT
    #: Its calls per caller per window (state/rates.py): a Rate of its own ("5/m" declared),
    #: counted apart from the others; rates.SETTING: RATE_LIMIT's; None: not rate limited.
    rate_limit: Any = rates.SETTING
    pinned: bool = False  #: tools/list lists it beside the search, TOOL_DISCOVERY "search" (discovery.py)

    @functools.cached_property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.func)

    @property
    def may_send(self) -> bool:  # anything (progress, logs, requests) before its result
        return self.context_param is not None or self.background

    @property
    def blocks(self) -> bool:  # its call runs the project's sync code in a thread (inline, sync)
        return not self.background and not self.is_async

    @property
    def idempotent(self) -> bool:  # declared safe to run again: a job whose worker died is retried
        return bool((self.annotations or {}).get("idempotentHint"))

    def describe(self) -> dict:
        entry = {"name": self.name, "inputSchema": self.input_schema}
        for key, value in (("title", self.title), ("description", self.description),
                           ("outputSchema", self.output_schema), ("annotations", self.annotations),
                           ("_meta", self.meta)):
            if value is not None:
                entry[key] = value
        if self.task_support:
            entry["execution"] = {"taskSupport": self.task_support}
        return entry

    def bind(self, arguments: dict) -> dict:
        """Keyword arguments for the function; raises ArgumentError, or InvalidParams for text a
        ``database_text`` tool cannot pass to its database."""
        if self.database_text:
            storable.refuse(arguments, self.name)
        if self.arguments_model is not None:
            try:
                model = self.arguments_model.model_validate(arguments)
            except pydantic.ValidationError as exc:
                raise ArgumentError(f"Invalid arguments for tool {self.name}: {_error_text(exc)}") from None
            return {name: getattr(model, name) for name in type(model).model_fields}
        try:
            jsonschema.validate(arguments, self.input_schema, cls=jsonschema.Draft202012Validator)
        except jsonschema.ValidationError as exc:
            raise ArgumentError(f"Invalid arguments for tool {self.name}: {exc.message}") from None
        return _accepted_kwargs(self.func, arguments)

    def to_result(self, value: Any) -> dict:
        """The CallToolResult for what the function returned."""
        if isinstance(value, content.ToolResult):
            return value.to_dict()
        if content.is_content_block(value):
            return {"content": [value]}
        if isinstance(value, list) and value and all(content.is_content_block(v) for v in value):
            return {"content": value}
        if self.return_adapter is None:
            return {"content": _unstructured_content(value)}
        return self._structured_result(value)

    def _structured_result(self, value):
        try:
            data = self.return_adapter.dump_python(self.return_adapter.validate_python(value), mode="json")
        except pydantic.ValidationError as exc:
            return content.error_result(f"Tool {self.name} returned output that does not match "
                                        f"its outputSchema: {_error_text(exc, 'result')}")
        structured = {"result": data} if self.wraps_result else data
        shown = data if self.wraps_result and isinstance(data, str) else json.dumps(structured, ensure_ascii=False)
        # "a tool that returns structured content SHOULD also return the serialized JSON in a
        # TextContent block" -- spec 2025-11-25 server/tools
        return {"content": [content.text(shown)], "structuredContent": structured}


def _unstructured_content(value):
    if value is None:
        return []
    if isinstance(value, str):
        return [content.text(value)]
    return [content.text(json.dumps(value, ensure_ascii=False, default=str))]


def _accepted_kwargs(func, arguments):
    params = inspect.signature(func).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return dict(arguments)
    return {k: v for k, v in arguments.items() if k in params}


_JOB_OPTIONS, _TASK_SUPPORT = ("queue", "soft_time_limit", "time_limit", "max_retries", "park"), ("optional", "required")


def _job_options(background) -> dict:
    """``background=True`` or a dict of Celery options for the job."""
    options = dict(background) if isinstance(background, dict) else {}
    if unknown := set(options) - set(_JOB_OPTIONS):
        raise ValueError(f"Unknown background options: {', '.join(sorted(unknown))}; use {', '.join(_JOB_OPTIONS)}.")
    return options


def make_tool(func, *, name=None, title=None, description=None, input_schema=None, output_schema=None,
              structured_output=None, annotations=None, meta=None, background=False, ui=None,
              task_support=None, permission=None, scopes=None, pinned=False,
              statement_timeout=DEFAULT_STATEMENT_TIMEOUT, rate_limit=rates.SETTING) -> ToolSpec:
    hints = typing.get_type_hints(func, include_extras=True)
    doc_description, param_docs = parse_docstring(func.__doc__)
    name = name or func.__name__
    context_param = _context_param(func, hints)
    if task_support is not None and (not background or task_support not in _TASK_SUPPORT):
        raise ValueError(f"task_support must be one of {', '.join(_TASK_SUPPORT)}, for background tools only.")
    meta = apps.with_tool_meta(meta, ui)  # MCP Apps: the ui:// view it names (methods/apps.py)
    spec = ToolSpec(name=name, func=func, title=title, description=description or doc_description,
                    annotations=annotations, meta=meta, context_param=context_param, background=bool(background),
                    job_options=_job_options(background), pinned=pinned,
                    task_support=(task_support or "optional") if background else None,
                    statement_timeout=statement_timeout, rate_limit=rates.tool_rate(rate_limit),
                    **access(permission, scopes))
    if input_schema is None:
        spec.arguments_model = _arguments_model(name, func, hints, context_param, param_docs)
        input_schema = spec.arguments_model.model_json_schema()
    else:
        jsonschema.Draft202012Validator.check_schema(input_schema)  # fail at import, not per call
    spec.input_schema = input_schema
    if structured_output is not False:
        schema, spec.return_adapter, spec.wraps_result = _output_schema(hints.get("return", inspect.Signature.empty))
        spec.output_schema = output_schema or schema
    return spec


@dataclass
class ResourceSpec:
    uri: str
    func: Callable
    name: str
    title: Optional[str] = None
    description: Optional[str] = None
    mime_type: Optional[str] = None
    #: For templates: the regex matching concrete URIs, with one group per variable.
    pattern: Any = None
    permission: Optional[str] = None
    scopes: tuple = ()
    #: ``visible(principal) -> bool``, as ToolSpec's.
    visible: Optional[Callable] = None
    #: For templates whose concrete resources are listed in ``resources/list`` (the model
    #: toolsets' rows): ``lister(ctx, cursor, size) -> (resources, next cursor or None)``, sync.
    #: Its cursors are strings (a client's made-up one, too: anything else is -32602 before the
    #: lister runs) that it reads as untrusted input.
    lister: Optional[Callable] = None
    #: ``readable(ctx, **variables)``, sync: raises ResourceNotFound when ``ctx.user`` may not
    #: read this concrete resource (the model toolsets' rows). resources/subscribe and
    #: subscriptions/listen run it, so that no one subscribes to what it may not read.
    readable: Optional[Callable] = None
    #: Name of the parameter that receives the Context, if any (it may ask the client, in the
    #: 2026-07-28 era: an InputRequiredResult).
    context_param: Optional[str] = None
    #: In resources/list (a skill's supporting files are read, not listed: skill_catalog.py).
    listed: bool = True

    @functools.cached_property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.func)

    @property
    def is_template(self) -> bool:
        return self.pattern is not None

    def describe(self) -> dict:
        entry = {"uriTemplate" if self.is_template else "uri": self.uri, "name": self.name}
        for key, value in (("title", self.title), ("description", self.description), ("mimeType", self.mime_type)):
            if value is not None:
                entry[key] = value
        return entry

    def match(self, uri: str) -> Optional[dict]:
        if not self.is_template:
            return {} if uri == self.uri else None
        found = self.pattern.fullmatch(uri)
        return found.groupdict() if found else None

    def to_contents(self, uri: str, value: Any) -> list:
        if isinstance(value, dict):
            return [value]
        if isinstance(value, list) and all(isinstance(v, dict) for v in value):
            return value
        if not isinstance(value, (str, bytes, bytearray)):
            value = json.dumps(value, ensure_ascii=False, default=str)
        return [content.resource_contents(uri, value, self.mime_type)]


def _template_pattern(uri_template: str):
    """RFC 6570 level 1: each ``{name}`` matches one path segment."""
    parts = re.split(r"\{(\w+)\}", uri_template)
    regex = "".join(re.escape(part) if i % 2 == 0 else f"(?P<{part}>[^/]+)" for i, part in enumerate(parts))
    return re.compile(regex)


@dataclass
class PromptSpec:
    name: str
    func: Callable
    title: Optional[str] = None
    description: Optional[str] = None
    arguments: list = field(default_factory=list)
    permission: Optional[str] = None
    scopes: tuple = ()
    #: Name of the parameter that receives the Context, if any (as for resources).
    context_param: Optional[str] = None

    @functools.cached_property
    def is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.func)

    def describe(self) -> dict:
        entry = {"name": self.name, "arguments": self.arguments}
        if self.title is not None:
            entry["title"] = self.title
        if self.description is not None:
            entry["description"] = self.description
        return entry

    def missing_arguments(self, given: dict) -> list:
        return [a["name"] for a in self.arguments if a.get("required") and a["name"] not in given]

    def to_result(self, value: Any) -> dict:
        if isinstance(value, dict) and "messages" in value:
            result = dict(value)
        elif isinstance(value, str):
            result = {"messages": [_user_message(value)]}
        else:
            result = {"messages": [_user_message(v) if isinstance(v, str) else v for v in value]}
        if self.description is not None:
            result.setdefault("description", self.description)
        return result


def _user_message(text: str) -> dict:
    return {"role": "user", "content": content.text(text)}


def _prompt_arguments(func, param_docs, context_param=None):
    arguments = []
    for param in inspect.signature(func).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD) or param.name == context_param:
            continue
        argument = {"name": param.name, "required": param.default is param.empty}
        if param.name in param_docs:
            argument["description"] = param_docs[param.name]
        arguments.append(argument)
    return arguments


class Registry:
    """What the server offers. One default instance, ``registry``, backs the decorators."""

    def __init__(self):
        self.tools: dict = CountedDict()
        self.resources: dict = {}
        self.templates: dict = {}
        self.prompts: dict = {}
        self.completers: dict = {}
        #: Skills by their SKILL.md's URI (skill_catalog.py); their files are in ``resources``.
        self.skills: dict = {}

    def tool(self, func=None, **options):
        """Register a function as a tool; usable as ``@tool`` or ``@tool(name=..., ...)``."""
        def register(f):
            spec = make_tool(f, **options)
            self.tools[spec.name] = spec
            return f
        return register(func) if func is not None else register

    def task_tool(self, celery_task, **options):
        """Expose an existing Celery task as a background tool; returns the task unchanged.

        The schema comes from the task function's signature and docstring; the job keeps the
        task's own ``queue``, ``soft_time_limit``, ``time_limit`` and ``max_retries`` unless
        ``background={...}`` overrides them. The worker calls the task in process (``task(**args)``)."""
        func = celery_task.run
        inherited = {key: getattr(celery_task, key, None) for key in _JOB_OPTIONS}
        background = {key: value for key, value in inherited.items() if value is not None}
        background.update(options.pop("background", None) or {})
        spec = make_tool(func, name=options.pop("name", None) or celery_task.name.rsplit(".", 1)[-1],
                         background=background or True, **options)
        spec.celery_task = celery_task
        self.tools[spec.name] = spec
        return celery_task

    def resource(self, uri: str, *, name=None, title=None, description=None, mime_type=None, permission=None,
                 scopes=None):
        """Register a resource; a URI with ``{var}`` parts makes a template."""
        who = access(permission, scopes)

        def register(f):
            doc, _ = parse_docstring(f.__doc__)
            spec = ResourceSpec(uri=uri, func=f, name=name or f.__name__, title=title,
                                description=description or doc, mime_type=mime_type,
                                context_param=_context_param(f, typing.get_type_hints(f)), **who)
            if "{" in uri:
                spec.pattern = _template_pattern(uri)
                self.templates[uri] = spec
            else:
                self.resources[uri] = spec
            return f
        return register

    def prompt(self, func=None, *, name=None, title=None, description=None, permission=None, scopes=None):
        who = access(permission, scopes)

        def register(f):
            doc, param_docs = parse_docstring(f.__doc__)
            context_param = _context_param(f, typing.get_type_hints(f))
            spec = PromptSpec(name=name or f.__name__, func=f, title=title, description=description or doc,
                              arguments=_prompt_arguments(f, param_docs, context_param), context_param=context_param,
                              **who)
            self.prompts[spec.name] = spec
            return f
        return register(func) if func is not None else register

    def completion(self, *, prompt=None, resource_template=None):
        """Register ``f(argument, value, context_arguments) -> list[str]`` for a prompt or template."""
        key = ("ref/prompt", prompt) if prompt else ("ref/resource", resource_template)

        def register(f):
            self.completers[key] = f
            return f
        return register

    def find_resource(self, uri: str):
        """(spec, variables) for a concrete URI, or (None, None)."""
        if uri in self.resources:
            return self.resources[uri], {}
        for spec in self.templates.values():
            variables = spec.match(uri)
            if variables is not None:
                return spec, variables
        return None, None


registry = Registry()
tool = registry.tool
task_tool = registry.task_tool
resource = registry.resource
prompt = registry.prompt
completion = registry.completion
