"""Clients at a given address, as the trusted proxy in front of the server says
(X-Forwarded-For): how the share tests tell callers apart without authorization."""
from mcp_transport.testing import HttpClient, ModernClient


class ClientAt(HttpClient):
    """A 2025-11-25 client at ``address``."""

    def __init__(self, url, address):
        super().__init__(url)
        self.address = address

    def headers(self, extra=None, session=True):
        return super().headers({"X-Forwarded-For": self.address, **(extra or {})}, session)


class ModernClientAt(ModernClient):
    """A 2026-07-28 client at ``address`` (``capabilities``: what it declares in ``_meta``)."""

    def __init__(self, url, address, capabilities=None):
        super().__init__(url, capabilities)
        self.address = address

    def headers(self, extra=None, session=True):
        return super().headers({"X-Forwarded-For": self.address, **(extra or {})}, session)
