#!/usr/bin/env python3
"""The conformance harness's authorization scenarios against the example project's authorization
server: conformance_authorization.py ISSUER MCP_URL OUTDIR

The harness (`conformance authorization`) takes a registered client id, prints an authorization
URL for a person to open in a browser, and waits for the redirect on its own callback server
(http://127.0.0.1:<port>/callback). This script stands in for the person:

1. a user with a password in the project's database (manage.py shell, the same environment as
   the server), and a client registered by dynamic client registration (RFC 7591) with the
   harness's callback as its redirect URI, public (PKCE S256, no secret);
2. the harness, run with that client id and the endpoint as RFC 8707 resource;
3. when it prints the authorization URL: the browser's part (the test kit's
   mcp_transport.testing.oauth, over HTTP with a cookie jar): open the URL, sign in on the login
   form, post the consent form with "Authorize", and follow the redirect to the harness's
   callback, which then exchanges the code for a token.

Exit status: the harness's (0 when no check failed), and 1 when a scenario did not report
SUCCESS. Results are in OUTDIR (the harness's checks.json per scenario).
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from mcp_transport.testing import free_port, oauth  # noqa: E402  (the project, beside this script)

HARNESS = ROOT / "node_modules" / "conformance-next" / "dist" / "index.js"
USER, PASSWORD = "conformance", "conformance-password-not-secret"
EXPECTED = ("authorization-server-metadata", "authorization-server-metadata-cimd", "authorization-code-grant")


def make_user() -> None:
    sys.path.insert(0, str(ROOT / "scripts"))
    from run import secret_key_env  # the same key as the server run.py started

    code = ("from django.contrib.auth.models import User\n"
            f"user, _ = User.objects.get_or_create(username={USER!r})\n"
            f"user.set_password({PASSWORD!r}); user.save()\n")
    subprocess.run([sys.executable, "manage.py", "shell", "-v0", "-c", code], cwd=ROOT, check=True,
                   env=secret_key_env(dict(os.environ)))


def register(issuer: str, callback: str) -> str:
    metadata = httpx2.get(f"{issuer}/.well-known/oauth-authorization-server").json()
    reply = httpx2.post(metadata["registration_endpoint"],
                        json={"client_name": "MCP conformance harness", "redirect_uris": [callback]})
    reply.raise_for_status()
    return reply.json()["client_id"]


def approve(authorization_url: str) -> None:
    """What the person does: sign in, authorize, and let the browser follow the redirect to the
    harness's callback server."""
    try:
        callback = oauth.approve(authorization_url, USER, PASSWORD)
    except oauth.SignInFailed as exc:
        raise SystemExit(str(exc)) from None
    httpx2.get(callback)


def reported(outdir: Path) -> dict:
    statuses = {}
    for checks in outdir.rglob("checks.json"):
        for check in json.loads(checks.read_text()):
            statuses[check["id"]] = check["status"]
    return statuses


def main(issuer: str, mcp_url: str, outdir: str) -> int:
    port = free_port()
    make_user()
    client_id = register(issuer, f"http://127.0.0.1:{port}/callback")
    authorization_endpoint = httpx2.get(f"{issuer}/.well-known/oauth-authorization-server").json()["authorization_endpoint"]
    harness = subprocess.Popen(
        ["npx", "--no-install", "node", str(HARNESS), "authorization", "--url", issuer, "--client-id", client_id,
         "--resource", mcp_url, "--port", str(port), "-o", outdir],
        cwd=ROOT, stdout=subprocess.PIPE, text=True, env=os.environ)
    authorization_url = None
    for line in harness.stdout:
        print(line, end="", flush=True)
        if line.startswith(authorization_endpoint):
            authorization_url = line.strip()
        elif line.startswith("Callback server started") and authorization_url:
            approve(authorization_url)  # only once its callback server listens
    code = harness.wait()
    statuses = reported(Path(outdir))
    print("conformance authorization:", json.dumps(statuses, sort_keys=True))
    if any(statuses.get(check) != "SUCCESS" for check in EXPECTED):
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
