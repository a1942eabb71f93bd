"""The official SDK's server (mcp 2.x MCPServer) with its token verifier, for bench/auth.py.

The same echo tool as ../shared/bench/server_sdk.py, behind the SDK's bearer-auth middleware
(``auth=AuthSettings``, ``token_verifier=``). Env:
  AUTH=jwt (default): a JWT verifier like the ones SDK users write: PyJWT against JWKS_URL
        (PyJWKClient, keys cached), iss = ISSUER, aud = RESOURCE, exp, on every request.
  AUTH=static: a dict lookup of STATIC_TOKEN (the cheapest possible verifier).
  AUTH=off: no auth (the same server, for the unauthenticated row).
  MODE=stateful_json (default) | stateful: JSON or SSE answers.
Run: uvicorn server_sdk_auth:app --app-dir bench --host 127.0.0.1 --port P --workers 1
"""
import asyncio
import os

import jwt
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

AUTH = os.environ.get("AUTH", "jwt")
RESOURCE = os.environ.get("RESOURCE", "http://127.0.0.1:8001/mcp")
ISSUER = os.environ.get("ISSUER", "https://issuer.bench/")


class JwtVerifier:
    def __init__(self):
        self.jwks = jwt.PyJWKClient(os.environ["JWKS_URL"], cache_jwk_set=True, lifespan=300)

    async def verify_token(self, token):
        return await asyncio.get_running_loop().run_in_executor(None, self._verify, token)

    def _verify(self, token):
        try:
            key = self.jwks.get_signing_key_from_jwt(token)
            claims = jwt.decode(token, key, algorithms=["RS256", "ES256"], audience=RESOURCE, issuer=ISSUER)
        except jwt.PyJWTError:
            return None
        return AccessToken(token=token, client_id=claims.get("client_id", "bench"), scopes=claims["scope"].split(),
                           expires_at=claims["exp"], resource=RESOURCE, subject=claims["sub"])


class StaticVerifier:
    async def verify_token(self, token):
        if token != os.environ["STATIC_TOKEN"]:
            return None
        return AccessToken(token=token, client_id="bench", scopes=["mcp"], resource=RESOURCE, subject="bench")


options = {}
if AUTH != "off":
    options = {"token_verifier": JwtVerifier() if AUTH == "jwt" else StaticVerifier(),
               "auth": AuthSettings(issuer_url=ISSUER, resource_server_url=RESOURCE, required_scopes=["mcp"])}
mcp = MCPServer("anchor-sdk-auth", **options)


@mcp.tool()
async def echo(text: str) -> str:
    """Return text unchanged."""
    return text


app = mcp.streamable_http_app(json_response=os.environ.get("MODE", "stateful_json") == "stateful_json")
