"""A toolset search has at most SEARCH_MAX_TERMS distinct words (issue 30, class 1): each word is
one more condition over every search field, and 100 one-letter words cost PostgreSQL 9 s on
300,000 books. Refused with one sentence before any query is built."""
import pytest
from django.core.exceptions import ValidationError

from mcp_transport.methods.registry import ToolError
from mcp_transport.toolsets import base, filters


def test_a_search_keeps_each_word_once():
    assert filters.search_words("dune  dune herbert") == ["dune", "herbert"]


def test_a_search_past_the_bound_is_refused_with_one_sentence():
    with pytest.raises(ValidationError) as refused:
        filters.search_words(" ".join("abcdefghijklmnopqrstuvwxyz"))
    assert refused.value.messages == ["A search takes at most 10 words; this one has 26."]


def test_the_toolset_refuses_it_as_a_tool_error_before_any_query():
    with pytest.raises(ToolError, match="at most 10 words"):  # no queryset is involved yet
        base._bounded_search(" ".join("abcdefghijklmnopqrstuvwxyz"))
