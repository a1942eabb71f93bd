"""The Call being served, and the method table's facts: the methods there are (``METHODS``, each
declared with its handler in the modules dispatch.py imports), what the server declares
(``capabilities``, ``initialize_result``) and what a request's method says of it (it counts as a
call, may send, names a target). The tasks utility plugs in here (``serve_tasks``).
"""
import time
from dataclasses import dataclass, field
from typing import Any, Optional

from .. import __version__
from ..auth.callers import Caller
from ..state import sessions
from ..conf import get_config, per_config
from ..protocol.jsonrpc import Request
from . import extensions
from .registry import registry
from .specs import UNKNOWN, MethodTable


@dataclass
class Call:
    """One request being served."""

    session: sessions.SessionRecord
    user: Any = None
    #: The auth.Principal of the request (its key, scopes and user).
    principal: Any = None
    #: Who it is for every per-caller limit and record, made once (of its principal, else its
    #: client address, when not given).
    caller: Optional[Caller] = None
    #: Where it goes (a running.routes.Route): its method's facts, its tool, its arguments bound,
    #: how it runs. Made once by the request pipeline; None for a call made elsewhere.
    route: Any = None
    #: Reaches the client while the request runs (notify, request, close_stream, cancelled).
    channel: Any = None
    #: Its place among its owner's running calls (a quotas.Slot), freed at its end unless the
    #: background job it creates takes it over.
    quota: Any = None
    #: A tools/call's place in its caller's rate window (a rates.Charge: Route.rate_charge),
    #: taken at admission (or by a 2025-11-25 session's read); None when not rate limited.
    rate: Any = None
    #: Its session's running background calls, when the transport's read of the session counted
    #: them (admission then needs no round trip of its own); None otherwise.
    running_calls: Optional[int] = None
    #: True once a task of its own runs it (that task releases the quota).
    started: bool = False
    #: For the calls log (running/calls.py): when it began (monotonic), its body's size, and
    #: the background job it started or continued.
    began: float = field(default_factory=time.monotonic)
    request_bytes: int = 0
    job_id: str = ""
    #: Its OpenTelemetry span (tracing.py), or None; it ends with the call (calls.finished).
    span: Any = None
    #: The client's address (TRUSTED_PROXIES honoured): who a sessionless call is, without a principal.
    address: str = ""
    #: Whose share of the sync threads its code takes (threads.py): its session, else its caller
    #: (running/pipeline.py: ``begin``).
    owner: Any = None
    #: A background tool's call (running/pipeline.py decides it, before the call runs).
    background: bool = False
    #: Its calls-log record is made (exactly one per call).
    recorded: bool = False
    #: Its handler runs now (running/pipeline.py: ``respond``): what a drain's deadline stops.
    handling: bool = False
    #: Its process was stopped (SIGTERM) and its grace ran out while it ran: it is answered with
    #: that error instead of its result (running/drain.py).
    stopped: bool = False
    #: What its handler says it changed: False, nothing (a cancel of a task that had ended);
    #: True, something; None, it says nothing (the method's rule decides: running/audit.py).
    changed: Any = None

    def __post_init__(self):
        if self.caller is None:
            self.caller = Caller.of(self.principal, self.address or getattr(self.session, "address", ""))


#: What each capability declares when it is declared (``declares``); tasks' comes from its module.
_DECLARATIONS = {"logging": {}, "tools": {"listChanged": True}, "resources": {"subscribe": True, "listChanged": True},
                 "prompts": {"listChanged": True}, "completions": {}}


def capabilities(era: str = extensions.LEGACY) -> dict:
    """"Servers MUST ... declare" what they support; declare only what is registered. The
    extensions are the era's declared ones (methods/extensions.py: skills, apps...)."""
    caps = {name: dict(settings) for name, settings in _DECLARATIONS.items() if declares(name)}
    if declares("tasks"):
        caps["tasks"] = tasks_utility.capability()
    declared = extensions.offered(era)
    if declared:
        caps["extensions"] = declared
    return caps


def declares(capability: str) -> bool:
    """Whether ``capabilities()`` has ``capability``: what every request asks, without building
    them all (the tasks check alone walks every tool)."""
    if capability == "logging":
        return True
    if capability == "tools":
        return bool(registry.tools)
    if capability == "resources":
        return bool(registry.resources or registry.templates)
    if capability == "prompts":
        return bool(registry.prompts)
    if capability == "completions":
        return bool(registry.prompts or registry.templates)
    if capability == "skills":
        return bool(registry.skills)
    if capability == "extensions":
        return bool(extensions.offered(extensions.LEGACY))
    if capability == "tasks":
        return tasks_utility is not None and any(spec.task_support for spec in registry.tools.values())
    return False


@per_config
def server_info() -> dict:
    """The server's Implementation: initialize's serverInfo, the serverInfo every 2026-07-28
    result carries, and the identity of its Server Card (transports/server_card.py), all one.
    Made once (every result shares it: it is read, never changed)."""
    config = get_config()
    info = {"name": config["SERVER_NAME"], "version": config["SERVER_VERSION"] or __version__}
    optional = {"title": config["SERVER_TITLE"], "description": config["SERVER_DESCRIPTION"],
                "websiteUrl": config["SERVER_WEBSITE_URL"], "icons": [dict(icon) for icon in config["SERVER_ICONS"]]}
    info.update((key, value) for key, value in optional.items() if value)
    return info


def initialize_result(protocol_version: str) -> dict:
    result = {"protocolVersion": protocol_version, "capabilities": capabilities(), "serverInfo": server_info()}
    if get_config()["INSTRUCTIONS"]:
        result["instructions"] = get_config()["INSTRUCTIONS"]
    return result


#: The methods of the 2025-11-25 era, each declared with its handler (specs.py) in the modules
#: dispatch.py imports; the 2026-07-28 era derives its table from this one.
METHODS = MethodTable()


def spec_of(request: Request):
    """The facts of the request's method (``specs.UNKNOWN`` for a method no table has)."""
    return METHODS.get(request.method, UNKNOWN)


def is_known_target(kind: str, name: str) -> bool:
    """A tool or prompt (``kind``, as a method declares its target) of this name is registered:
    tracing names spans and labels metrics only after those."""
    return name in (registry.tools if kind == "tool" else registry.prompts)


def target_of(request: Request):
    """(kind, value) of the tool, prompt or resource the request's method acts on (value "" when
    the request names none), or None for a method without a target."""
    spec = spec_of(request)
    return (spec.target_kind, spec.target_of(request.params)) if spec.target_kind else None


def counts_as_call(request: Request) -> bool:
    return spec_of(request).counts_as_call


def may_send(request: Request) -> bool:
    """Whether the handler can send messages before its result (then the reply must be SSE)."""
    return spec_of(request).may_send(request.params)


def target_spec(request: Request):
    """The tool, resource or prompt a call names, if it exists (for auth's scope check)."""
    spec = spec_of(request)
    target = spec.target_of(request.params) if spec.scoped else ""
    if not target:
        return None
    if spec.target_kind == "tool":
        return registry.tools.get(target)
    if spec.target_kind == "prompt":
        return registry.prompts.get(target)
    return registry.find_resource(target)[0]


#: The 2025-11-25 tasks utility (eras/legacy_2025/tasks.py), once ``serve_tasks`` plugged it in.
tasks_utility = None


def serve_tasks(utility) -> None:
    """Serve the tasks utility's methods (``utility.METHODS``), its capability
    (``utility.capability()``) and task-augmented calls (``utility.create``). The app plugs in
    eras/legacy_2025/tasks.py when it is ready (apps.py): the methods, below the eras, import none."""
    global tasks_utility
    tasks_utility = utility
    METHODS.update(utility.METHODS)
