"""Opt-in tuning for the ASGI server in front of the app. Call from the project's asgi.py.

    from mcp_transport.serving import tune_daphne
    tune_daphne()
"""
import functools


def tune_daphne() -> bool:
    """Memoise Twisted's Content-Type parsing, which daphne pays on every POST.

    Twisted's ``Request.requestReceived`` parses each POST's Content-Type with
    ``email.message.EmailMessage`` to look for form bodies, which daphne never reads (it takes
    the raw body). ``_parseContentType`` is a pure function of the header value, so a bounded
    cache changes nothing but the cost: about 115 µs per request, 12 % of an echo call
    (bench/RESULTS.md). Returns False when Twisted is not installed or has changed.
    """
    try:
        from twisted.web import http as twisted_http
    except ImportError:
        return False
    parse = getattr(twisted_http, "_parseContentType", None)
    if parse is None or hasattr(parse, "cache_info"):
        return parse is not None
    twisted_http._parseContentType = functools.lru_cache(maxsize=64)(parse)
    return True
