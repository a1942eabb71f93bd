"""An OAuth 2.1 authorization server for projects that have none, on django-oauth-toolkit.

Opt-in: a project that uses another authorization server never imports this package. One that
wants its own adds ``oauth2_provider`` to ``INSTALLED_APPS``, the toolkit settings of
docs/authorization-server.md, and ``path("", include("mcp_transport.oauth.urls"))``.

What MCP clients need and the toolkit's defaults do not give, added here (views.py):

- dynamic client registration (RFC 7591) open to anyone, as MCP clients register before any
  user is known, but only for public clients using the authorization code grant with PKCE, with
  https or loopback http redirect URIs, and bounded per client network (an IPv4 address, an
  IPv6 /64) and in total, where a full table makes room by evicting its oldest unused clients,
  so that nobody can fill the application table for everyone else;
- the consent page and a login page in the app's own templates (Django's LoginView);
- every endpoint in the toolkit's URL namespace, so its RFC 8414 metadata view finds them.
"""
