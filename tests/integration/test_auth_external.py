"""Tokens of an external authorization server, on a real daphne with MCP_AUTH=on: JWTs checked
against a JWKS, and opaque tokens asked about at an RFC 7662 introspection endpoint. Both are
served by a tiny HTTP server in this test, with keys generated here; every token the spec says
to refuse (expired, another audience, another issuer, a bad signature, alg "none", HMAC with the
public key, inactive) gets 401."""
import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from mcp_transport.testing import HttpClient, free_port

ISSUER = "https://issuer.test/"
CLIENT_ID, CLIENT_SECRET = "mcp-resource", "introspection-secret"


class AuthorizationServer:
    """What the resource server fetches: /jwks.json and /introspect."""

    def __init__(self):
        self.keys = {}  # kid -> private key
        self.introspection = {}  # token -> answer
        self.jwks_fetches = 0
        self.port = free_port()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), self._handler())
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def add_key(self, kid, key):
        self.keys[kid] = key

    def jwks(self):
        entries = []
        for kid, key in self.keys.items():
            rsa_key = isinstance(key, rsa.RSAPrivateKey)
            algorithm = jwt.algorithms.RSAAlgorithm if rsa_key else jwt.algorithms.ECAlgorithm
            entry = json.loads(algorithm.to_jwk(key.public_key()))
            entries.append({**entry, "kid": kid, "use": "sig"})
        return {"keys": entries}

    def _handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                if self.path != "/jwks.json":
                    return self.reply(404, {})
                server.jwks_fetches += 1
                self.reply(200, server.jwks())

            def do_POST(self):
                expected = "Basic " + base64.b64encode(f"{CLIENT_ID}:{CLIENT_SECRET}".encode()).decode()
                body = self.rfile.read(int(self.headers["Content-Length"])).decode()
                if self.path != "/introspect" or self.headers.get("Authorization") != expected:
                    return self.reply(401, {"error": "invalid_client"})
                form = dict(pair.split("=", 1) for pair in body.split("&"))
                self.reply(200, server.introspection.get(form.get("token"), {"active": False}))

        return Handler

    def stop(self):
        self.httpd.shutdown()


@pytest.fixture(scope="module")
def issuer():
    server = AuthorizationServer()
    server.add_key("rsa-1", rsa.generate_private_key(public_exponent=65537, key_size=2048))
    server.add_key("ec-1", ec.generate_private_key(ec.SECP256R1()))
    yield server
    server.stop()


@pytest.fixture(scope="module")
def server(start_server, issuer):
    validators = [
        {"BACKEND": "mcp_transport.auth.validators.JwtValidator",
         "OPTIONS": {"jwks_uri": issuer.url("/jwks.json"), "issuer": ISSUER, "jwks_cooldown": 0}},
        {"BACKEND": "mcp_transport.auth.validators.IntrospectionValidator",
         "OPTIONS": {"url": issuer.url("/introspect"), "client_id": CLIENT_ID, "client_secret": CLIENT_SECRET}},
    ]
    settings = {"AUTH_VALIDATORS": validators, "AUTH_SERVERS": [ISSUER]}
    return start_server(MCP_AUTH="on", MCP_TRANSPORT_JSON=json.dumps(settings))


def sign(issuer, kid="rsa-1", algorithm=None, key=None, headers=None, **claims):
    private = key or issuer.keys[kid]
    algorithm = algorithm or ("RS256" if isinstance(private, rsa.RSAPrivateKey) else "ES256")
    return jwt.encode(claims, private, algorithm=algorithm, headers={"kid": kid, **(headers or {})})


def claims_for(server, **overrides):
    now = int(time.time())
    return {"iss": ISSUER, "sub": "jwt-alice", "aud": server.url, "exp": now + 600, "iat": now, "scope": "mcp",
            **overrides}


INITIALIZE = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}


def status_of(server, token):
    """The answer to an initialize presenting ``token`` (200 once the token is accepted)."""
    client = HttpClient(server.url, token=token)
    return client.request("POST", client.message("initialize", INITIALIZE), session=False)


def whoami(server, token):
    client = HttpClient(server.url, token=token)
    client.initialize()
    reply = client.call("tools/call", {"name": "whoami"})
    return reply["result"]["content"][0]["text"]


def test_metadata_names_the_external_authorization_server(server):
    origin = server.url.rsplit("/mcp", 1)[0]
    from urllib.request import urlopen

    with urlopen(f"{origin}/.well-known/oauth-protected-resource/mcp", timeout=30) as response:
        assert json.loads(response.read())["authorization_servers"] == [ISSUER]


def test_a_valid_jwt_is_its_subject_as_a_django_user(server, issuer):
    assert whoami(server, sign(issuer, **claims_for(server))) == "jwt-alice"
    assert whoami(server, sign(issuer, kid="ec-1", **claims_for(server, sub="jwt-eve"))) == "jwt-eve"
    # RFC 8707: aud may be a list that contains this endpoint.
    listed = sign(issuer, **claims_for(server, aud=["https://other.example/api", server.url]))
    assert status_of(server, listed).status == 200


@pytest.mark.parametrize("case", ["expired", "other audience", "no audience", "other issuer", "no expiry"])
def test_jwts_the_spec_refuses_are_401(server, issuer, case):
    now = int(time.time())
    overrides = {"expired": {"exp": now - 120}, "other audience": {"aud": "https://other.example/mcp"},
                 "other issuer": {"iss": "https://evil.example/"}}.get(case, {})
    claims = claims_for(server, **overrides)
    if case == "no audience":
        del claims["aud"]
    if case == "no expiry":
        del claims["exp"]
    reply = status_of(server, sign(issuer, **claims))
    assert reply.status == 401, (case, reply.body)
    assert 'error="invalid_token"' in reply.headers["www-authenticate"]


def test_a_bad_signature_is_401(server, issuer):
    forged_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    forged = sign(issuer, key=forged_key, **claims_for(server))  # kid rsa-1, another key
    assert status_of(server, forged).status == 401
    genuine = sign(issuer, **claims_for(server))
    head, body, signature = genuine.split(".")
    tampered_body = base64.urlsafe_b64encode(json.dumps(claims_for(server, sub="jwt-root")).encode()).rstrip(b"=")
    assert status_of(server, f"{head}.{tampered_body.decode()}.{signature}").status == 401


def test_alg_none_and_hmac_with_the_public_key_are_401(server, issuer):
    unsigned = jwt.encode(claims_for(server), None, algorithm="none", headers={"kid": "rsa-1"})
    assert status_of(server, unsigned).status == 401
    public_pem = jwt.algorithms.RSAAlgorithm.to_jwk(issuer.keys["rsa-1"].public_key()).encode()
    header = base64.urlsafe_b64encode(json.dumps({"alg": "HS256", "kid": "rsa-1", "typ": "JWT"}).encode())
    payload = base64.urlsafe_b64encode(json.dumps(claims_for(server)).encode())
    import hashlib
    import hmac

    signing_input = header.rstrip(b"=") + b"." + payload.rstrip(b"=")
    mac = base64.urlsafe_b64encode(hmac.new(public_pem, signing_input, hashlib.sha256).digest()).rstrip(b"=")
    assert status_of(server, (signing_input + b"." + mac).decode()).status == 401


def test_a_new_signing_key_is_fetched_when_a_token_names_it(server, issuer):
    assert status_of(server, sign(issuer, **claims_for(server))).status == 200
    fetched = issuer.jwks_fetches
    issuer.add_key("rsa-2", rsa.generate_private_key(public_exponent=65537, key_size=2048))
    rotated = sign(issuer, kid="rsa-2", **claims_for(server, sub="jwt-rotated"))
    assert whoami(server, rotated) == "jwt-rotated"
    assert issuer.jwks_fetches > fetched


def test_a_jwt_without_the_required_scope_is_403(server, issuer):
    reply = status_of(server, sign(issuer, **claims_for(server, scope="email")))
    assert reply.status == 403
    assert 'error="insufficient_scope"' in reply.headers["www-authenticate"]


def test_a_session_is_bound_to_its_jwt_subject(server, issuer):
    alice = HttpClient(server.url, token=sign(issuer, **claims_for(server, sub="jwt-owner")))
    alice.initialize()
    mallory = alice.with_token(sign(issuer, **claims_for(server, sub="jwt-mallory")))
    assert mallory.request("POST", mallory.message("tools/list")).status == 404
    # Another token of the same subject (a refreshed one) keeps the session.
    refreshed = alice.with_token(sign(issuer, **claims_for(server, sub="jwt-owner", iat=int(time.time()) + 1)))
    assert refreshed.request("POST", refreshed.message("tools/list")).status == 200


# -- RFC 7662 introspection ---------------------------------------------------------------------

def test_introspected_tokens(server, issuer):
    now = int(time.time())
    issuer.introspection.update({
        "opaque-good": {"active": True, "username": "ivy", "scope": "mcp", "aud": server.url, "exp": now + 600},
        "opaque-sub-only": {"active": True, "sub": "ivan", "scope": "mcp", "aud": [server.url]},
        "opaque-inactive": {"active": False},
        "opaque-other-audience": {"active": True, "username": "ivy", "scope": "mcp", "aud": "https://other/mcp"},
        "opaque-no-audience": {"active": True, "username": "ivy", "scope": "mcp"},
        "opaque-expired": {"active": True, "username": "ivy", "scope": "mcp", "aud": server.url, "exp": now - 120},
        "opaque-no-scope": {"active": True, "username": "ivy", "scope": "profile", "aud": server.url},
    })
    assert whoami(server, "opaque-good") == "ivy"
    assert whoami(server, "opaque-sub-only") == "ivan"
    for token in ("opaque-inactive", "opaque-other-audience", "opaque-no-audience", "opaque-expired", "opaque-unknown"):
        assert status_of(server, token).status == 401, token
    assert status_of(server, "opaque-no-scope").status == 403
