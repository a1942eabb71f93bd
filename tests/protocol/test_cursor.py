"""Cursors: the SSE event ids of the HTTP+SSE transport (protocol/cursor.py)."""
import pytest
from hypothesis import given
from hypothesis import strategies as st

from mcp_transport.protocol.cursor import MAX_OPEN, Cursor
from mcp_transport.protocol.errors import InvalidRequest

SESSION = "AbCdEfGhIjKlMnOpQrStUvWx_-12345"
positions = st.builds(lambda ms, seq: f"{ms}-{seq}", st.integers(0, 2**48), st.integers(0, 2**20))


@given(st.integers(1, 10_000), st.dictionaries(st.integers(0, 9_999), positions, max_size=MAX_OPEN))
def test_parse_reads_back_what_str_writes(known, open_streams):
    entries = tuple(sorted((entry, pos) for entry, pos in open_streams.items() if entry < known))
    cursor = Cursor(SESSION, known, entries)
    assert Cursor.parse(str(cursor)) == cursor


def test_the_format_is_session_known_and_entries():
    assert str(Cursor(SESSION, 3, ((0, "17-0"), (2, "0-0")))) == f"{SESSION}:3:0.17-0:2.0-0"


@pytest.mark.parametrize("value", [
    "", "g.1-0", f"{SESSION}", f"{SESSION}:x", f"{SESSION}:2:0.1", f"{SESSION}:2:2.1-0",  # entry >= known
    f"{SESSION}:3:1.1-0:0.1-0",  # out of order
    f"{SESSION}:3:1.1-0:1.2-0",  # twice
    "short:1:0.1-0", f"{SESSION}:1:0.١-0",
    f"{SESSION}:{MAX_OPEN + 2}" + "".join(f":{i}.1-0" for i in range(MAX_OPEN + 1)),
])
def test_anything_else_is_an_invalid_request(value):
    with pytest.raises(InvalidRequest):
        Cursor.parse(value)
