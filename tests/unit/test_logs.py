"""logs: session and request ids on log records, and one JSON object per line."""
import asyncio
import json
import logging
import sys

import pytest

from mcp_transport import logs


def record(message="hello %s", args=("world",), exc_info=None, **extra):
    made = logging.LogRecord("mcp_transport.test", logging.INFO, __file__, 1, message, args, exc_info)
    made.__dict__.update(extra)
    return made


@pytest.fixture(autouse=True)
def fresh_context():
    """Each test runs its body in a copy of the context, so the ids never leak between tests."""
    import contextvars

    context = contextvars.copy_context()
    yield context


def test_filter_adds_dashes_when_nothing_is_bound(fresh_context):
    def run():
        made = record()
        assert logs.ContextFilter().filter(made) is True
        return made.mcp_session_id, made.mcp_request_id

    assert fresh_context.run(run) == ("-", "-")


def test_filter_adds_the_bound_ids(fresh_context):
    def run():
        logs.bind_session("s-123")
        logs.bind_request(0)  # a falsy request id is still an id
        made = record()
        logs.ContextFilter().filter(made)
        return made.mcp_session_id, made.mcp_request_id

    assert fresh_context.run(run) == ("s-123", 0)


def test_explicit_extra_wins_over_the_context(fresh_context):
    def run():
        logs.bind_session("current")
        made = record(mcp_session_id="other")
        logs.ContextFilter().filter(made)
        return made.mcp_session_id

    assert fresh_context.run(run) == "other"


def test_tasks_started_while_serving_a_request_carry_its_ids(fresh_context):
    async def serve():
        logs.bind_session("s-1")
        logs.bind_request("r-1")
        return await asyncio.get_running_loop().create_task(child())

    async def child():
        made = record()
        logs.ContextFilter().filter(made)
        return made.mcp_session_id, made.mcp_request_id

    assert fresh_context.run(asyncio.run, serve()) == ("s-1", "r-1")


def test_json_formatter_writes_one_object_with_ids_and_extras(fresh_context):
    def run():
        logs.bind_session("s-9")
        return logs.JsonFormatter().format(record(stream="abc"))

    line = fresh_context.run(run)
    assert "\n" not in line
    payload = json.loads(line)
    assert payload["message"] == "hello world"
    assert (payload["level"], payload["logger"]) == ("INFO", "mcp_transport.test")
    assert (payload["mcp_session_id"], payload["mcp_request_id"], payload["stream"]) == ("s-9", "-", "abc")
    assert "args" not in payload and "msg" not in payload  # standard attributes stay out


def test_json_formatter_includes_the_traceback():
    try:
        raise ValueError("boom")
    except ValueError:
        import sys

        payload = json.loads(logs.JsonFormatter().format(record(exc_info=sys.exc_info())))
    assert "ValueError: boom" in payload["exc_info"]


# -- log forging (issue 20, class 10): one record is one line in every format -------------------

PLAIN = "%(levelname)s [%(mcp_session_id)s %(mcp_request_id)s] %(message)s"
FORGED = "x\r\nERROR [aaaaaaaa 1] forged\x1b[2J\u2028\x85"


def _plain(made):
    handler = logging.StreamHandler()
    handler.addFilter(logs.ContextFilter())
    handler.setFormatter(logging.Formatter(PLAIN))
    assert handler.filter(made)
    return handler.format(made)


def test_control_characters_in_a_message_argument_are_escaped():
    line = _plain(record("session opened by %s %s", (FORGED, "1\n2")))
    assert "\n" not in line and "\r" not in line and "\x1b" not in line and "\u2028" not in line
    assert line.endswith("session opened by x\\r\\nERROR [aaaaaaaa 1] forged\\x1b[2J\\u2028\\x85 1\\n2")


def test_a_request_id_with_a_newline_is_escaped(fresh_context):
    def run():
        logs.bind_request("7\nERROR forged")
        return _plain(record())
    assert fresh_context.run(run) == "INFO [- 7\\nERROR forged] hello world"


def test_an_exception_text_keeps_the_traceback_lines_but_not_the_clients():
    try:
        raise ValueError(f"bad name {FORGED}")
    except ValueError:
        made = record("tool failed", (), exc_info=sys.exc_info())
    lines = _plain(made).split("\n")
    assert lines[0] == "INFO [- -] tool failed" and lines[1] == "Traceback (most recent call last):"
    assert lines[-1] == "ValueError: bad name x\\r\\nERROR [aaaaaaaa 1] forged\\x1b[2J\\u2028\\x85"
    assert not any(line.startswith("ERROR") for line in lines)


def test_a_record_without_controls_is_left_as_it_is():
    made = record("hello %s", ("world",))
    logs.ContextFilter().filter(made)
    assert (made.msg, made.args) == ("hello %s", ("world",))


def test_json_stays_one_line_and_keeps_the_text():
    made = record("name %s", ("a\nb",))
    logs.ContextFilter().filter(made)
    payload = logs.JsonFormatter().format(made)
    assert "\n" not in payload and json.loads(payload)["message"] == "name a\\nb"
