from twisted.web import http as twisted_http

from mcp_transport.serving import tune_daphne


def test_tune_daphne_memoises_content_type_parsing_without_changing_it():
    original = getattr(twisted_http._parseContentType, "__wrapped__", twisted_http._parseContentType)
    headers = [b"application/json", b"Application/JSON; charset=utf-8", b"multipart/form-data; boundary=x", b""]
    expected = [original(h) for h in headers]
    assert tune_daphne() is True
    assert hasattr(twisted_http._parseContentType, "cache_info")
    assert [twisted_http._parseContentType(h) for h in headers] == expected
    assert tune_daphne() is True  # idempotent: not wrapped twice
    assert twisted_http._parseContentType.__wrapped__ is original
