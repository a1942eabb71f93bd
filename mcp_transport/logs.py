"""Structured logs: the MCP session id, JSON-RPC request id and trace ids on every log record.

The consumer sets two context variables when it knows a request's session and id. Asyncio tasks
and the threads of sync tools copy the context, so a record logged anywhere while serving the
request (this app, a tool, the ORM) can carry both. ``ContextFilter`` copies them onto each
record as ``mcp_session_id`` and ``mcp_request_id`` ("-" when unknown); ``JsonFormatter`` writes
one JSON object per line. The session id goes into records shortened to its first
``SHORT_ID_LENGTH`` characters: the full id is what a client presents to use the session (its
only credential), and logs are read by more people, and kept longer, than sessions live. The
prefix still finds the session (the admin and ``mcp_sessions show`` take a prefix). With
OpenTelemetry's API installed (tracing.py), ``trace_id`` and ``span_id`` name the current span
(the call's, or its job's in a worker; "-" when there is none), so a line finds its trace. Put
the filter on a *handler*: filters on a logger do not see the records its child loggers propagate.

    LOGGING = {
        "version": 1,
        "filters": {"mcp": {"()": "mcp_transport.logs.ContextFilter"}},
        "formatters": {
            "plain": {"format": "%(asctime)s %(levelname)s %(name)s [%(mcp_session_id)s %(mcp_request_id)s %(trace_id)s %(span_id)s] %(message)s"},
            "json": {"()": "mcp_transport.logs.JsonFormatter"},
        },
        "handlers": {"console": {"class": "logging.StreamHandler", "filters": ["mcp"], "formatter": "json"}},
        "root": {"handlers": ["console"], "level": "INFO"},
    }

Every string a client controls can reach a record: ``clientInfo``'s name and version, request
ids, method and tool names, what a tool logs, header values in an error. A CR or LF in one
would start a forged line in a plain format, so ``ContextFilter`` escapes the control characters
of every record it passes -- its message, its ids and its traceback's text -- as ``\\n``,
``\\x1b``, ``\\u2028``: one record is one line (a traceback's own line breaks excepted), whatever
the format string. A record with nothing to escape is left as it is.

A value a client chose and a line quotes -- a header, ``clientInfo``'s name, what a token's
header says -- is shown by ``client_value``: its first ``CLIENT_VALUE_CHARS`` characters,
escaped, and its length when it is longer. The libraries this app hands such values to and that
log them whole as arguments (OpenTelemetry's trace context propagators: a malformed
``tracestate`` member of up to 8 KB in a WARNING per request) get the same rule on their
loggers (``quote_client_values``, from ``apps.ready``).

Setting a context variable costs well under a microsecond, so the request path pays nothing
measurable; the work is done only for records that a handler actually emits.
"""
import contextvars
import json
import logging
import re

from . import tracing

session_id = contextvars.ContextVar("mcp_session_id", default=None)
request_id = contextvars.ContextVar("mcp_request_id", default=None)

#: Characters of a session id that logs show: 48 bits, enough to tell sessions apart.
SHORT_ID_LENGTH = 8

#: Attributes of every LogRecord, so that JsonFormatter adds only what ``extra=`` brought.
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


def bind_session(value) -> None:
    """The session the current request (task) serves."""
    session_id.set(value)


def bind_request(value) -> None:
    """The JSON-RPC id of the request the current task serves."""
    request_id.set(value)


#: C0 and C1 controls, DEL, and the Unicode line and paragraph separators (some viewers break
#: lines at them).
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def escape_controls(text: str) -> str:
    """``text`` with every control character written as an escape (``\\n``, ``\\x1b``, ``\\u2028``)."""
    return _CONTROL.sub(_escape_one, text)


def _escape_one(match):
    char = match.group()
    return _NAMED.get(char) or (f"\\x{ord(char):02x}" if ord(char) < 0x100 else f"\\u{ord(char):04x}")


#: Characters of a value a client chose that a log line shows: enough to recognise it by.
CLIENT_VALUE_CHARS = 64
#: Controls, and lone surrogates (JSON may carry one; a log file's encoding may refuse it).
_CLIENT_ESCAPED = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\ud800-\udfff]")

#: Loggers of libraries that log a value a client sent whole (``quote_client_values``).
CLIENT_VALUE_LOGGERS = ("opentelemetry.trace.span", "opentelemetry.trace.propagation.tracecontext",
                        "opentelemetry.baggage.propagation")


def client_value(value) -> str:
    """A value a client chose, as a log line may show it: its first CLIENT_VALUE_CHARS
    characters with control characters (and lone surrogates) escaped, then, if it is longer,
    ``… (<n> characters)``."""
    text = value if isinstance(value, str) else str(value)
    shown = _CLIENT_ESCAPED.sub(_escape_one, text[:CLIENT_VALUE_CHARS])
    return shown if len(text) <= CLIENT_VALUE_CHARS else f"{shown}… ({len(text)} characters)"


class ClientValues(logging.Filter):
    """On a library's logger whose records carry what a client sent as their arguments: each
    string argument as ``client_value`` shows it."""

    def filter(self, record):
        if isinstance(record.args, tuple):
            record.args = tuple(client_value(arg) if isinstance(arg, str) else arg for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: client_value(arg) if isinstance(arg, str) else arg
                           for key, arg in record.args.items()}
        return True


def quote_client_values(names=CLIENT_VALUE_LOGGERS) -> None:
    """Put ``ClientValues`` on these loggers (once each): their records quote a client's values
    as this app's own lines do."""
    for name in names:
        logger = logging.getLogger(name)
        if not any(isinstance(existing, ClientValues) for existing in logger.filters):
            logger.addFilter(ClientValues())


class ContextFilter(logging.Filter):
    """Adds ``mcp_session_id`` and ``mcp_request_id`` to every record (never drops one), and
    escapes the control characters of its message, ids and traceback (log forging)."""

    def filter(self, record):
        _add_ids(record)
        _escape_record(record)
        return True


def _escape_record(record):
    try:
        message = record.getMessage()
    except Exception:  # a bad format call: the handler reports it as it emits (handleError)
        return
    if _CONTROL.search(message):
        record.msg, record.args = escape_controls(message), None
    if isinstance(record.mcp_request_id, str):
        record.mcp_request_id = escape_controls(record.mcp_request_id)
    if record.exc_info and not record.exc_text:
        record.exc_text = _traceback_text(record.exc_info)


def _traceback_text(exc_info) -> str:
    """The traceback as logging writes it, its exceptions' own texts escaped: the line breaks
    between its lines are the traceback's, the ones in a message a client may have chosen."""
    text = logging.Formatter().formatException(exc_info)
    exc, seen = exc_info[1], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        try:
            said = str(exc)
        except Exception:  # an exception whose __str__ fails: the traceback says so already
            said = ""
        if _CONTROL.search(said):
            text = text.replace(said, escape_controls(said))
        exc = exc.__cause__ or exc.__context__
    return re.sub("[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]", _escape_one, text)


def short_id(value) -> str:
    """A session id as logs and lists show it: its first SHORT_ID_LENGTH characters."""
    return "-" if not value or value == "-" else str(value)[:SHORT_ID_LENGTH]


def _add_ids(record):
    # Also when ``extra=`` brought the id: no record carries a full one.
    record.mcp_session_id = short_id(getattr(record, "mcp_session_id", None) or session_id.get())
    if not hasattr(record, "mcp_request_id"):
        current = request_id.get()
        record.mcp_request_id = "-" if current is None else current
    if not hasattr(record, "trace_id"):
        record.trace_id, record.span_id = tracing.current_ids() or ("-", "-")


class JsonFormatter(logging.Formatter):
    """One JSON object per record: time, level, logger, message, the ids, ``extra=`` fields, and
    the traceback if any. It adds the ids itself, so it works without ContextFilter too."""

    def format(self, record):
        _add_ids(record)
        payload = {"time": self.formatTime(record), "level": record.levelname, "logger": record.name,
                   "message": record.getMessage()}
        for name, value in vars(record).items():
            if name not in _STANDARD:
                payload[name] = value
        if record.exc_info:
            payload["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(payload, default=str, ensure_ascii=False)
