"""logs.client_value: a value a client chose, as a log line shows it (issue 30, class 8), for
this app's lines and for the libraries' it hands such values to (OpenTelemetry's propagators)."""
import logging

import pytest

from mcp_transport import logs


def test_a_short_value_is_itself_with_its_controls_escaped():
    assert logs.client_value("mcp-inspector") == "mcp-inspector"
    assert logs.client_value("a\r\nb\x1b\u2028\ud800") == "a\\r\\nb\\x1b\\u2028\\ud800"
    assert logs.client_value(12) == "12"


def test_a_long_value_is_its_start_and_its_length():
    shown = logs.client_value("\x00" + "x" * 8191)
    assert shown == "\\x00" + "x" * 63 + "… (8192 characters)"


def test_the_filter_shortens_the_string_arguments_of_a_librarys_records():
    made = logging.LogRecord("lib", logging.WARNING, __file__, 1, "bad %s (%d) %s", ("y" * 500, 7, "ok"), None)
    assert logs.ClientValues().filter(made) is True
    assert made.getMessage() == "bad " + "y" * 64 + "… (500 characters) (7) ok"
    mapping = logging.LogRecord("lib", logging.WARNING, __file__, 1, "%(v)s", ({"v": "z" * 100},), None)
    logs.ClientValues().filter(mapping)
    assert mapping.getMessage() == "z" * 64 + "… (100 characters)"


def test_the_filter_is_on_the_trace_context_propagators_loggers_once():
    logs.quote_client_values()
    logs.quote_client_values()
    for name in logs.CLIENT_VALUE_LOGGERS:
        assert sum(isinstance(f, logs.ClientValues) for f in logging.getLogger(name).filters) == 1


def test_a_malformed_tracestate_is_logged_by_its_start(caplog):
    propagate = pytest.importorskip("opentelemetry.propagate")
    member = "bad member " + "Q" * 7000
    with caplog.at_level(logging.WARNING):
        propagate.extract({"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                           "tracestate": f"rojo=1,{member}"})
    (warned,) = [r for r in caplog.records if r.name == "opentelemetry.trace.span"]
    assert warned.getMessage().endswith("… (7011 characters)") and "Q" * 100 not in caplog.text
