"""protocol/storable.py: the first string no database stores as text, and where it is."""
import pytest

from mcp_transport.protocol import storable
from mcp_transport.protocol.errors import InvalidParams


def test_text_passes_whatever_it_holds():
    assert storable.unstorable({"a": ["\U0001f600", "\x01\x7f\t", {"b": "\u2028"}], "c": 1, "d": None}, "x") is None
    storable.refuse({"search": "plain", "year__gte": 1990, "ids": [1, 2]}, "book_list")


def test_the_first_nul_or_lone_surrogate_is_found_at_any_depth():
    assert storable.unstorable("a\x00", "search") == ("search", "a NUL character (U+0000)")
    assert storable.unstorable(["ok", "\udc00"], "ids") == ("ids[1]", "a lone surrogate (U+DC00)")
    assert storable.unstorable({"k": {"n": ["x", "\x00"]}}, "data") == ("data[k][n][1]", "a NUL character (U+0000)")
    assert storable.unstorable({"\x00": 1}, "data") == ("a key of data", "a NUL character (U+0000)")
    assert storable.unstorable({"first": "\x00", "second": "\x00"}, "d")[0] == "d[first]"


def test_refuse_is_one_sentence_naming_the_argument_and_never_echoing_a_strange_name():
    with pytest.raises(InvalidParams) as refused:
        storable.refuse({"title": "ok", "title__icontains": "a\x00b"}, "book_list")
    assert refused.value.code == -32602
    assert str(refused.value) == ("Invalid arguments for tool book_list: title__icontains holds a NUL character "
                                  "(U+0000), which this server's database does not store as text.")
    with pytest.raises(InvalidParams) as named:
        storable.refuse({"x\x00y": 1}, "book_list")
    assert "the name of an argument holds a NUL" in str(named.value) and "\x00" not in str(named.value)
    with pytest.raises(InvalidParams) as long_name:
        storable.refuse({"n." * 100: "\x00"}, "book_list")
    assert "book_list: ? holds" in str(long_name.value)
