"""A person signing in to the project's OAuth authorization server (``mcp_transport.oauth``), as a
browser would, for tests of tools behind authorization (docs/testing.md).

    client = oauth_client(server.url, "alice", "her password")      # mcp.Client, the whole flow
    async with client:
        await client.call_tool("whoami", {})

``SignIn`` is the browser: it follows the authorization URL to Django's login page, signs in,
approves the consent page and keeps the redirect back to the client, which carries the code.
Its ``open`` and ``callback`` are the ``redirect_handler`` and ``callback_handler`` of the SDK's
``OAuthClientProvider``; ``approve`` does the same from synchronous code. Needs the ``mcp`` SDK
(and the ``httpx2`` client it brings).
"""
import asyncio
from html.parser import HTMLParser
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx2

#: Where the client says the browser comes back to; nothing needs to listen there, since
#: ``SignIn`` reads the code from the redirect instead of following it.
DEFAULT_REDIRECT_URI = "http://127.0.0.1:53682/callback"


class SignInFailed(AssertionError):
    """The login or consent page did not answer as a person's browser expects."""


class Form(HTMLParser):
    """The first form of a page: its action and its inputs' names and values."""

    def __init__(self, page: str):
        super().__init__()
        self.action, self.fields = None, {}
        self.feed(page)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "form" and self.action is None:
            self.action = attrs.get("action") or ""
        elif tag == "input" and attrs.get("name") and attrs.get("type") != "submit":
            self.fields[attrs["name"]] = attrs.get("value") or ""


class SignIn:
    """The browser of a person who signs in with a password and approves what the client asks."""

    def __init__(self, username: str, password: str):
        self.username, self.password = username, password
        #: The authorization server's redirect back to the client (code, state, iss).
        self.redirect = None

    async def open(self, authorization_url: str) -> str:
        """Sign in and approve; the redirect URL (also kept as ``self.redirect``)."""
        async with httpx2.AsyncClient(timeout=60) as browser:
            page = await _follow(browser, await browser.get(authorization_url))
            login = Form(page.text)
            page = await _follow(browser, await browser.post(
                urljoin(str(page.url), login.action),
                data={**login.fields, "username": self.username, "password": self.password},
                headers={"Referer": str(page.url)}))
            consent = Form(page.text)
            if "password" in consent.fields:
                raise SignInFailed(f"the login page refused {self.username!r} and its password")
            answer = await browser.post(str(page.url), data={**consent.fields, "allow": "Authorize"},
                                        headers={"Referer": str(page.url)})
            if answer.status_code != 302:
                raise SignInFailed(f"the consent page answered {answer.status_code}, not a redirect: {answer.text[:300]}")
        self.redirect = answer.headers["Location"]
        return self.redirect

    async def callback(self):
        """The code and state of the redirect, as the SDK's ``callback_handler`` returns them."""
        from mcp.shared.auth import AuthorizationCodeResult

        if self.redirect is None:
            raise SignInFailed("callback() before open(): the client never sent the browser to sign in")
        query = parse_qs(urlsplit(self.redirect).query)
        if "code" not in query:
            raise SignInFailed(f"the authorization server sent no code back: {self.redirect}")
        return AuthorizationCodeResult(code=query["code"][0], state=query.get("state", [None])[0],
                                       iss=query.get("iss", [None])[0])


def approve(authorization_url: str, username: str, password: str) -> str:
    """``SignIn(username, password).open(authorization_url)`` from synchronous code."""
    return asyncio.run(SignIn(username, password).open(authorization_url))


async def _follow(browser, response):
    while response.status_code in (301, 302, 303):
        response = await browser.get(urljoin(str(response.url), response.headers["Location"]))
    if response.status_code != 200:
        raise SignInFailed(f"{response.url} answered {response.status_code}: {response.text[:300]}")
    return response


class MemoryTokenStorage:
    """The SDK's ``TokenStorage`` in memory: the client's registration and its tokens."""

    def __init__(self):
        self.tokens = self.client_info = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client_info

    async def set_client_info(self, client_info):
        self.client_info = client_info


def oauth_provider(url: str, username: str, password: str, storage=None, redirect_uri=DEFAULT_REDIRECT_URI):
    """The SDK's ``OAuthClientProvider`` for the MCP endpoint ``url``, signing in as ``username``
    when the server asks: discovery, registration (RFC 7591), PKCE, consent and the token."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientMetadata

    browser = SignIn(username, password)
    metadata = OAuthClientMetadata(client_name=f"test client of {username}", redirect_uris=[redirect_uri],
                                   grant_types=["authorization_code", "refresh_token"], response_types=["code"])
    return OAuthClientProvider(url, metadata, storage or MemoryTokenStorage(),
                               redirect_handler=browser.open, callback_handler=browser.callback)


def authorized_client(url: str, auth=None, token: str | None = None, **options):
    """``mcp.Client`` on ``url`` that authenticates with an ``httpx2.Auth`` (such as
    ``oauth_provider``) or a bearer ``token``; ``options`` are the SDK's (``mode`` ...)."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    headers = {"Authorization": f"Bearer {token}"} if token else None
    return Client(streamable_http_client(url, http_client=create_mcp_http_client(headers=headers, auth=auth)),
                  **options)


def oauth_client(url: str, username: str, password: str, storage=None, **options):
    """``mcp.Client`` that signs ``username`` in through the whole OAuth flow when the server asks."""
    return authorized_client(url, auth=oauth_provider(url, username, password, storage), **options)
