"""ids: session ids, stream keys and SSE event ids."""
import re

import pytest

from mcp_transport.protocol import ids
from mcp_transport.protocol.errors import ErrorCode, InvalidRequest
from mcp_transport.protocol.ids import GET_STREAM, EventId

VISIBLE_ASCII = re.compile(r"^[\x21-\x7E]+$")


# --- session ids --------------------------------------------------------------------------------

def test_new_session_ids_are_unique_visible_ascii_and_long_enough():
    session_ids = [ids.new_session_id() for _ in range(1000)]
    assert len(set(session_ids)) == 1000
    for session_id in session_ids:
        assert isinstance(session_id, str)
        assert VISIBLE_ASCII.match(session_id), session_id
        # At least 128 random bits: 22 base64url characters.
        assert len(session_id) >= 22
        assert ids.is_session_id(session_id)


@pytest.mark.parametrize("value", [
    "a" * 22,
    "A" * 128,
    "abcdefghijklmnopqrstuvwxyz0123456789_-",
    "-" * 22,
])
def test_is_session_id_true(value):
    assert ids.is_session_id(value) is True


@pytest.mark.parametrize("value", [
    "",
    "short",
    "a" * 21,
    "a" * 129,
    "a" * 21 + " ",
    " " + "a" * 22,
    "a" * 22 + "\n",
    "a" * 11 + " " + "a" * 11,
    "a" * 21 + "+",
    "a" * 21 + "/",
    "a" * 21 + "=",
    "a" * 21 + ".",
    "a" * 21 + "\x7f",
    "a" * 21 + "\u00e9",
    "a" * 21 + "\u0661",
    "../" + "a" * 22,
])
def test_is_session_id_false(value):
    assert ids.is_session_id(value) is False


# --- stream keys --------------------------------------------------------------------------------

def test_new_stream_key_is_16_lowercase_hex_and_random():
    keys = [ids.new_stream_key() for _ in range(200)]
    assert len(set(keys)) == 200
    for key in keys:
        assert re.fullmatch(r"[0-9a-f]{16}", key), key
        assert key != GET_STREAM
        assert EventId.parse(f"{key}.1-0") == EventId(key, "1-0")


# --- event ids ----------------------------------------------------------------------------------

@pytest.mark.parametrize("value, stream, position", [
    ("g.1-0", "g", "1-0"),
    ("g.0-0", "g", "0-0"),
    ("0123456789abcdef.123-4", "0123456789abcdef", "123-4"),
    ("ffffffffffffffff.1700000000000-15", "ffffffffffffffff", "1700000000000-15"),
    ("g.18446744073709551615-18446744073709551615", "g", "18446744073709551615-18446744073709551615"),
])
def test_event_id_parse_and_str_round_trip(value, stream, position):
    event_id = EventId.parse(value)
    assert event_id == EventId(stream, position)
    assert event_id.stream == stream and event_id.position == position
    assert str(event_id) == value
    assert EventId.parse(str(event_id)) == event_id


def test_event_id_parse_strips_surrounding_whitespace():
    assert EventId.parse("  g.1-0\t") == EventId("g", "1-0")


def test_event_id_built_from_new_stream_key_round_trips():
    event_id = EventId(ids.new_stream_key(), "42-7")
    assert EventId.parse(str(event_id)) == event_id


@pytest.mark.parametrize("value", [
    "",
    " ",
    "1",
    "abc",
    "g",
    "g.",
    "g.1",
    "g.1-",
    "g.-0",
    "g.1-0-0",
    "g.-1-0",
    "g.1--0",
    "g.1.5-0",
    "g..1-0",
    "g:1-0",
    "G.1-0",
    "h.1-0",
    "_GET_stream.1-0",
    "g.1-0 extra",
    "g.1-0\x00",
    "g .1-0",
    "../x",
    "../g.1-0",
    "g/../1-0",
    "0123456789abcdef",
    "0123456789abcdef.",
    "0123456789ABCDEF.1-0",
    "0123456789abcdeF.1-0",
    "0123456789abcde.1-0",
    "0123456789abcdef0.1-0",
    "0123456789abcdeg.1-0",
    "g." + "1" * 21 + "-0",
    "g.1-" + "1" * 21,
    "g.\u0661-0",
    "g.1-\u0662",
    "g.\uff11-0",
    "g.1-0\u00e9",
])
def test_event_id_parse_rejects(value):
    with pytest.raises(InvalidRequest) as info:
        EventId.parse(value)
    assert info.value.http_status == 400
    assert info.value.http_status != 404
    assert info.value.code == ErrorCode.INVALID_REQUEST


@pytest.mark.parametrize("earlier, later", [
    ("g.1-0", "g.2-0"),
    ("g.2-0", "g.10-0"),      # numeric, not lexicographic
    ("g.1-1", "g.1-2"),
    ("g.1-9", "g.1-10"),
    ("g.1-99", "g.2-0"),      # major first
    ("g.9-0", "g.1700000000000-0"),
])
def test_sort_key_orders_positions(earlier, later):
    a, b = EventId.parse(earlier), EventId.parse(later)
    assert a.sort_key < b.sort_key
    assert not b.sort_key < a.sort_key


def test_sort_key_sorts_a_shuffled_list():
    positions = ["10-0", "2-0", "2-10", "2-9", "1-0", "0-1", "0-0"]
    ordered = sorted((EventId("g", p) for p in positions), key=lambda e: e.sort_key)
    assert [e.position for e in ordered] == ["0-0", "0-1", "1-0", "2-0", "2-9", "2-10", "10-0"]


def test_sort_key_values():
    assert EventId.parse("g.1700000000000-15").sort_key == (1700000000000, 15)
    assert EventId.parse("g.007-08").sort_key == (7, 8)


@pytest.mark.parametrize("value", ["g.18446744073709551616-0", "g.0-18446744073709551616", "g.99999999999999999999-0"])
def test_positions_beyond_64_bits_are_not_ids(value):
    with pytest.raises(InvalidRequest):
        EventId.parse(value)


def test_the_largest_position_is_an_id():
    assert EventId.parse("g.18446744073709551615-18446744073709551615").sort_key == (2**64 - 1, 2**64 - 1)


def test_new_ids_never_start_with_a_dash():
    """A command line reads a leading "-" as an option: ``mcp_sessions terminate -abc…`` failed
    for 1 id in 64 before."""
    assert not [value for value in (ids.new_session_id() for _ in range(5000)) if value.startswith("-")]
    assert not [value for value in (ids.new_token(24) for _ in range(5000)) if value.startswith("-")]
