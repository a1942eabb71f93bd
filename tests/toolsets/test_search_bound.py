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


# -- a DRF viewset's search (issue 38): counted as its SearchFilter counts it ---------------------
# DRF's SearchFilter.get_search_terms splits on whitespace AND commas, keeps repeats and keeps a
# quoted phrase whole; each term is one more condition over every search field. Counting distinct
# words let "v v v ..." (100 words) and "v,v,v,..." (199 characters, 100 terms, one "word") through:
# 10 s and 13.5 s of PostgreSQL on 300,000 books for one shelf_list call (10 terms: 1.6 s).

def _drf_search(user, search, viewset=None):
    """A shelf_list call (ShelfViewSet, or ``viewset``) and the queries it made."""
    from types import SimpleNamespace

    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from mcp_transport.toolsets.drf import ViewSetToolset
    from tools.library.api import ShelfViewSet

    toolset = ViewSetToolset(viewset or ShelfViewSet, name="shelf")
    with CaptureQueriesContext(connection) as queries:
        try:
            return toolset.call(SimpleNamespace(user=user), "list", "list", "get", False, {}, {"search": search}), queries
        except ToolError as refused:
            return str(refused), queries


@pytest.fixture
def reader(db):
    """A user who may view books, with no throttle count yet (the viewset's: 20 a minute)."""
    from django.contrib.auth.models import Permission, User
    from django.core.cache import cache

    user = User.objects.create(username="search-reader")
    user.user_permissions.add(*Permission.objects.filter(codename="view_book"))
    cache.delete(f"throttle_user_{user.pk}")
    return User.objects.get(pk=user.pk)


@pytest.mark.parametrize("search, terms", [(" ".join(["v"] * 100), 100), (",".join(["v"] * 100), 100),
                                           (" ".join(["dune"] * 11), 11), ("a,b c,d e,f g,h i,j k", 11)])
def test_a_drf_search_counts_its_terms_as_the_search_filter_does_and_is_refused_before_any_query(
        reader, search, terms):
    answer, queries = _drf_search(reader, search)
    assert answer == f"A search takes at most 10 terms; this one has {terms}."
    assert len(queries) == 0, [query["sql"] for query in queries]


@pytest.mark.parametrize("search", [",".join(["v"] * 10), '"' + " ".join(["v"] * 30) + '" dune', "dune,,, ,dune"])
def test_a_drf_search_of_at_most_ten_terms_runs(reader, search):
    answer, queries = _drf_search(reader, search)
    assert isinstance(answer, dict) and "items" in answer, answer
    assert queries, "the viewset ran its query"


def test_the_backends_own_term_parser_decides(reader):
    """A SearchFilter that takes the whole search as one term may take 100 words."""
    from rest_framework import filters

    from tools.library.api import ShelfViewSet

    class WholeSearch(filters.SearchFilter):
        def get_search_terms(self, request):
            value = request.query_params.get(self.search_param, "")
            return [value] if value else []

    class WholeShelf(ShelfViewSet):
        filter_backends = [WholeSearch, filters.OrderingFilter]

    answer, _queries = _drf_search(reader, " ".join(["v"] * 100), WholeShelf)
    assert isinstance(answer, dict) and "items" in answer, answer
