"""``path("", include("mcp_transport.oauth.urls"))`` serves the authorization server:

- ``/.well-known/oauth-authorization-server``: RFC 8414 metadata (the toolkit's view; the issuer
  is this origin, which is what the protected resource metadata names by default);
- ``/o/authorize/`` (login, then the consent page), ``/o/token/``, ``/o/revoke_token/``,
  ``/o/introspect/``: the toolkit's endpoints;
- ``/o/register/``: dynamic client registration (RFC 7591), and ``/o/register/<client_id>/``
  (RFC 7592, with the registration access token);
- ``/o/login/``, ``/o/logout/``: Django's own views in the app's templates.

The namespace is the toolkit's (``oauth2_provider``), because its metadata and registration views
look their neighbours up by those names. Do not also include ``oauth2_provider.urls``.
"""
from django.contrib.auth import views as auth_views
from django.urls import path
from oauth2_provider import views as toolkit

from .views import AuthorizeView, ClientManagementView, ClientRegistrationView, MetadataView

app_name = "oauth2_provider"

urlpatterns = [
    path(".well-known/oauth-authorization-server", MetadataView.as_view(),
         name="oauth-server-metadata"),
    path("o/authorize/", AuthorizeView.as_view(), name="authorize"),
    path("o/token/", toolkit.TokenView.as_view(), name="token"),
    path("o/revoke_token/", toolkit.RevokeTokenView.as_view(), name="revoke-token"),
    path("o/introspect/", toolkit.IntrospectTokenView.as_view(), name="introspect"),
    path("o/register/", ClientRegistrationView.as_view(), name="dcr-register"),
    path("o/register/<str:client_id>/", ClientManagementView.as_view(),
         name="dcr-register-management"),
    path("o/login/", auth_views.LoginView.as_view(template_name="mcp_transport/oauth/login.html"), name="login"),
    path("o/logout/", auth_views.LogoutView.as_view(template_name="mcp_transport/oauth/logged_out.html"),
         name="logout"),
]
