"""The list methods' cursors (protocol/list_cursors.py): what is issued reads back, and reading
anything else raises InvalidParams (-32602), never another exception."""
from datetime import datetime, timezone

import pytest
from hypothesis import given, strategies as st

from mcp_transport.protocol import list_cursors
from mcp_transport.protocol.errors import InvalidParams

JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
                    lambda children: st.lists(children) | st.dictionaries(st.text(), children), max_leaves=20)


def whole(value):
    return value


def moment_and_text(value):
    created, name = list_cursors.items(value, 2)
    return list_cursors.moment(created), list_cursors.text(name)


@given(JSON)
def test_what_is_issued_reads_back(value):
    assert list_cursors.read(list_cursors.issue(value), whole) == value


@given(st.text() | JSON)
def test_anything_else_is_invalid_params_or_a_value_of_the_shape(cursor):
    for shape in (whole, moment_and_text, lambda value: list_cursors.optional_text(list_cursors.field(value, "at"))):
        try:
            list_cursors.read(cursor, shape)
        except InvalidParams as refused:
            assert str(refused) == list_cursors.NOT_ISSUED


@pytest.mark.parametrize("value", [["0001-01-01T00:00:00+23:59", "x"], ["9999-12-31T23:59:59-23:59", "x"],
                                   ["2020-01-01T00:00:00", "x"], ["2020-13-01T00:00:00+00:00", "x"],
                                   [1, "x"], ["2020-01-01T00:00:00+00:00"], ["2020-01-01T00:00:00+00:00", 1]])
def test_a_moment_beyond_the_years_a_database_holds_or_of_another_shape_is_refused(value):
    with pytest.raises(InvalidParams):
        list_cursors.read(list_cursors.issue(value), moment_and_text)


def test_a_moment_reads_back_in_utc():
    read = list_cursors.read(list_cursors.issue(["2020-01-01T01:30:00+01:30", "x"]), moment_and_text)
    assert read == (datetime(2020, 1, 1, tzinfo=timezone.utc), "x")


@pytest.mark.parametrize("cursor", [None, 5, ["x"], {"after": "x"}, "", "%%%", "\ud800", "W1s=" * 3,
                                    list_cursors.issue({"at": [":"]})])
def test_cursors_never_issued_are_refused(cursor):
    with pytest.raises(InvalidParams):
        list_cursors.read(cursor, lambda value: list_cursors.optional_text(list_cursors.field(value, "at")))
