"""What the rest of the server needs to know of one MCP method, declared once, with its handler.

Each handler is registered with its facts::

    @METHODS.method("prompts/get", capability="prompts", counts_as_call=True, target="name",
                    target_kind="prompt", may_send=_asks_the_client, round_trip=True)
    async def prompts_get(params, call): ...

and every layer reads them from its era's table: dispatch (-32601 for an undeclared
capability), the request pipeline (quota admission, JSON or SSE), auth (the scopes of the
target), the calls log and the span (the target), the 2026-07-28 era (``Mcp-Name``, which methods
may end a round with an InputRequiredResult). Adding a method is one decorated function.
"""
from dataclasses import dataclass, replace
from typing import Any, Awaitable, Callable, Optional


def never(params: dict) -> bool:
    return False


def always(params: dict) -> bool:
    return True


@dataclass(frozen=True)
class MethodSpec:
    """One method's facts. ``handler(params, call)`` returns its result or raises a ProtocolError."""

    name: str
    handler: Callable[[dict, Any], Awaitable[dict]]
    #: The server capability it belongs to: "methods of features we did not declare return -32601".
    capability: Optional[str] = None
    #: It runs the project's code (a tool, resource, prompt, completer) or waits for a task:
    #: MAX_CALLS_PER_SESSION / MAX_CALLS_PER_CALLER bound how many run at once.
    counts_as_call: bool = False
    #: ``may_send(params)``: the handler may send messages before its result (the reply is SSE).
    may_send: Callable[[dict], bool] = never
    #: The params key naming what it acts on ("name", "uri", "taskId"): the 2026-07-28
    #: ``Mcp-Name`` header mirrors it.
    target: Optional[str] = None
    #: What that target is ("tool", "prompt", "resource"): the calls log and the span record it.
    target_kind: Optional[str] = None
    #: Whether the principal needs the target's scopes (auth.require_spec_scopes).
    scoped: bool = False
    #: 2026-07-28: "InputRequiredResult ... is allowed only on tools/call, prompts/get and
    #: resources/read" (basic/patterns/mrtr): the handler may ask the client in a round trip.
    round_trip: bool = False
    #: ``blocks(params)``: the handler runs the project's sync code in a thread (a query may take
    #: long): a 2026-07-28 call then runs in a task of its own, which its client's leaving cancels.
    blocks: Callable[[dict], bool] = never

    def target_of(self, params) -> str:
        """The string the request's target key holds, or ""."""
        value = params.get(self.target) if self.target and isinstance(params, dict) else None
        return value if isinstance(value, str) else ""


class MethodTable(dict):
    """The methods of one era, by name."""

    def add(self, spec: MethodSpec) -> MethodSpec:
        self[spec.name] = spec
        return spec

    def method(self, name: str, **facts):
        """Decorator: register the function as ``name``'s handler, with its facts."""
        def register(handler):
            self.add(MethodSpec(name, handler, **facts))
            return handler
        return register

    def derive(self, *, without=(), handlers=None) -> "MethodTable":
        """Another era's table: these methods less ``without``, some served by other
        ``handlers`` (name -> handler) with the same facts."""
        table = MethodTable((name, spec) for name, spec in self.items() if name not in without)
        for name, handler in (handlers or {}).items():
            table[name] = replace(table[name], handler=handler)
        return table


#: What a method that is not in a table is (nothing to count, send, or check).
UNKNOWN = MethodSpec("", handler=None)


class CountedDict(dict):
    """A dict that counts its changes (``version``): the registry's tools, whose search index
    (methods/discovery.py) is rebuilt when they change, and only then."""

    version = 0

    def _changed(self):
        self.version += 1

    def __setitem__(self, key, value):
        super().__setitem__(key, value)
        self._changed()

    def __delitem__(self, key):
        super().__delitem__(key)
        self._changed()

    def pop(self, *args):
        self._changed()
        return super().pop(*args)

    def update(self, *args, **kwargs):
        super().update(*args, **kwargs)
        self._changed()

    def setdefault(self, key, default=None):
        self._changed()
        return super().setdefault(key, default)

    def popitem(self):
        self._changed()
        return super().popitem()

    def clear(self):
        super().clear()
        self._changed()
