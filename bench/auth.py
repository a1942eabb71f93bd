#!/usr/bin/env python3
"""What authentication costs per request: authenticated echo against unauthenticated, ours and
the official SDK server with its token verifier, side by side.

    .venv/bin/python bench/auth.py                     # 2 interleaved repeats, 16 clients, 8 s each
    .venv/bin/python bench/auth.py --repeat 3 --seconds 10 --clients 16
    .venv/bin/python bench/auth.py --repeat 0          # only the auth step alone (below)

Targets (each a closed loop of ``tools/call echo`` with JSON answers, every request carrying
its bearer token, after ``initialize`` on one session per client):

- ``ours-open``        daphne, MCP_AUTH off
- ``ours-static``      daphne, MCP_AUTH on, a static token (``manage.py mcp_tokens create``),
                       trusted from memory for AUTH_REVOCABLE_MEMORY_SECONDS (10, the default)
- ``ours-toolkit``     the same server, a django-oauth-toolkit access token
- ``ours-jwt``         the same server, an RS256 JWT checked against a JWKS served here
- ``ours-static-mem``  another daphne with AUTH_REVOCABLE_MEMORY_SECONDS=30, a static token
- ``sdk-open``         bench/server_sdk_auth.py (mcp 2.3.0 MCPServer, uvicorn) without auth
- ``sdk-static``       the same with a dict-lookup TokenVerifier (the cheapest one possible)
- ``sdk-jwt``          the same with a PyJWT TokenVerifier against the same JWKS

For each: calls/s, latency p50/p99 (ms), the server process's CPU per call (µs, from
/proc/<pid>/stat over the measured window), and for ours Redis's CPU per call (an embedded
redis-server of its own, so nobody else's commands are counted).

Then, because a shared machine's load moves the end-to-end figures by more than what auth
costs, the auth step alone: ``mcp_transport.auth.authenticate()`` in one process against the
same Redis and database, warm caches, for each kind of token and both memory settings (µs per
call, the median of 5 rounds of 2,000). Nothing is written to RESULTS.md by this script: copy
the tables it prints.
"""
import argparse
import asyncio
import json
import os
import secrets
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import aiohttp
import jwt
import redis
from cryptography.hazmat.primitives.asymmetric import rsa

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from mcp_transport.testing import free_port  # noqa: E402

ISSUER = "https://issuer.bench/"
ACCEPT = "application/json, text/event-stream"
TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime


class Jwks:
    """A JWKS endpoint in this process, and the key that signs the bench's JWTs."""

    def __init__(self):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        body = json.dumps({"keys": [{**public, "kid": "bench-1", "use": "sig"}]}).encode()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.port = free_port()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.port}/jwks.json"

    def token(self, audience: str, subject="bench-jwt") -> str:
        now = int(time.time())
        claims = {"iss": ISSUER, "sub": subject, "aud": audience, "iat": now, "exp": now + 3600, "scope": "mcp"}
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": "bench-1"})


class Server:
    def __init__(self, name, argv, env, port):
        self.name, self.port = name, port
        self.url = f"http://127.0.0.1:{port}/mcp"
        self.log = tempfile.NamedTemporaryFile(prefix=f"bench-auth-{name}-", suffix=".log", delete=False)
        self.process = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=self.log, stderr=subprocess.STDOUT,
                                        start_new_session=True)

    def wait(self, timeout=60):
        import socket

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.name} exited:\n{Path(self.log.name).read_text()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return self
            except OSError:
                time.sleep(0.1)
        raise RuntimeError(f"{self.name} did not listen")

    def stop(self):
        if self.process.poll() is None:
            os.killpg(self.process.pid, 15)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, 9)


async def client_loop(session, url, token, deadline, measure_from, latencies, errors):
    headers = {"Content-Type": "application/json", "Accept": ACCEPT}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {},
                       "clientInfo": {"name": "bench", "version": "0"}}}
    async with session.post(url, json=init, headers=headers) as response:
        assert response.status == 200, (response.status, await response.text())
        headers["Mcp-Session-Id"] = response.headers["Mcp-Session-Id"]
        await response.read()
    headers["MCP-Protocol-Version"] = "2025-11-25"
    async with session.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers) as r:
        await r.read()
    request_id = 0
    while time.monotonic() < deadline:
        request_id += 1
        body = {"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                "params": {"name": "echo", "arguments": {"text": "hello"}}}
        started = time.monotonic()
        async with session.post(url, json=body, headers=headers) as response:
            text = await response.text()
        if response.status != 200 or '"hello"' not in text:
            errors.append((response.status, text[:200]))
        elif started >= measure_from:
            latencies.append(time.monotonic() - started)


async def run_target(url, token, clients, seconds, warmup):
    latencies, errors = [], []
    connector = aiohttp.TCPConnector(limit=clients * 2)
    async with aiohttp.ClientSession(connector=connector) as session:
        start = time.monotonic()
        measure_from, deadline = start + warmup, start + warmup + seconds
        await asyncio.gather(*(client_loop(session, url, token, deadline, measure_from, latencies, errors)
                               for _ in range(clients)))
    return latencies, errors


def measure(target, args, redis_client):
    name, server, token = target
    before_cpu = None

    async def go():
        nonlocal before_cpu
        task = asyncio.create_task(run_target(server.url, token, args.clients, args.seconds, args.warmup))
        await asyncio.sleep(args.warmup)
        before_cpu = (time.monotonic(), cpu_seconds(server.process.pid), redis_cpu(redis_client))
        latencies, errors = await task
        after = (time.monotonic(), cpu_seconds(server.process.pid), redis_cpu(redis_client))
        return latencies, errors, after

    latencies, errors, after = asyncio.run(go())
    window = after[0] - before_cpu[0]
    calls = len(latencies)
    latencies.sort()
    return {"target": name, "calls_per_s": calls / window, "p50_ms": statistics.median(latencies) * 1000,
            "p99_ms": latencies[int(len(latencies) * 0.99)] * 1000,
            "server_cpu_us_per_call": (after[1] - before_cpu[1]) / calls * 1e6,
            "redis_cpu_us_per_call": (after[2] - before_cpu[2]) / calls * 1e6 if name.startswith("ours") else None,
            "errors": len(errors), "first_error": errors[0] if errors else None}


def redis_cpu(client) -> float:
    info = client.info("cpu")
    return info["used_cpu_user"] + info["used_cpu_sys"]


def manage(env, *args) -> str:
    done = subprocess.run([sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=300)
    if done.returncode:
        raise RuntimeError(done.stdout + done.stderr)
    return done.stdout


def micro():
    """The auth step alone, in this process (run as a child with the bench's environment)."""
    import django

    django.setup()
    from django.test.utils import override_settings

    from mcp_transport import auth

    tokens, resource = json.loads(os.environ["BENCH_TOKENS"]), os.environ["BENCH_RESOURCE"]
    port = resource.split(":")[2].split("/")[0]
    scope = {"scheme": "http", "path": "/mcp", "type": "http"}

    async def rounds(token):
        headers = {"host": f"127.0.0.1:{port}", "authorization": f"Bearer {token}"}
        await auth.authenticate(scope, headers)  # validated once (database, JWKS), then cached
        results = []
        for _ in range(5):
            started = time.process_time()
            for _ in range(2000):
                await auth.authenticate(scope, headers)
            results.append((time.process_time() - started) / 2000 * 1e6)
        return statistics.median(results)

    print("| token | auth step, Redis read per request (AUTH_REVOCABLE_MEMORY_SECONDS=0) µs | "
          "trusted from memory (10, the default) µs |")
    print("|---|---|---|")
    rows = {}
    for memory in (0, 10):
        config = {**django.conf.settings.MCP_TRANSPORT, "AUTH_REVOCABLE_MEMORY_SECONDS": memory}
        with override_settings(MCP_TRANSPORT=config):
            for kind, token in tokens.items():
                rows.setdefault(kind, []).append(asyncio.run(rounds(token)))
    for kind, (plain, memory) in rows.items():
        print(f"| {kind} | {plain:.1f} | {memory:.1f} |")


def main():
    if "--micro-child" in sys.argv:
        return micro()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--warmup", type=float, default=2)
    parser.add_argument("--clients", type=int, default=16)
    args = parser.parse_args()

    from mcpserver.embedded_redis import EmbeddedRedis

    embedded = EmbeddedRedis().start()
    workdir = tempfile.mkdtemp(prefix="bench-auth-")
    jwks = Jwks()
    ours_port, open_port, mem_port = free_port(), free_port(), free_port()
    sdk_ports = {n: free_port() for n in ("off", "static", "jwt")}
    ours_url = f"http://127.0.0.1:{ours_port}/mcp"
    validators = [{"BACKEND": "mcp_transport.auth.validators.StaticTokenValidator"},
                  {"BACKEND": "mcp_transport.auth.validators.OAuthToolkitValidator"},
                  {"BACKEND": "mcp_transport.auth.validators.JwtValidator",
                   "OPTIONS": {"jwks_uri": jwks.url, "issuer": ISSUER}}]
    env = {**os.environ, "REDIS_URL": embedded.url, "DJANGO_SECRET_KEY": secrets.token_urlsafe(40),
           "DATABASE_URL": f"sqlite:///{workdir}/bench.sqlite3", "MCP_KEY_PREFIX": "bench",
           "DJANGO_SETTINGS_MODULE": "mcpserver.settings", "LOG_LEVEL": "WARNING", "MCP_LOG_LEVEL": "WARNING",
           "MCP_REQUEST_RATE_LIMIT": "off", "MCP_SESSION_OPEN_RATE": "off"}  # one address sends it all
    manage(env, "migrate", "--noinput", "-v", "0")
    static_token = manage(env, "mcp_tokens", "create", "--user", "bench").strip().splitlines()[-1]
    toolkit_token = "bench-toolkit-" + secrets.token_urlsafe(24)
    manage(env, "shell", "-c", (
        "from datetime import timedelta; from django.contrib.auth.models import User; "
        "from django.utils import timezone; from oauth2_provider.models import AccessToken, Application; "
        "user, _ = User.objects.get_or_create(username='bench-toolkit'); "
        "app = Application.objects.create(name='bench', client_type='public', "
        "authorization_grant_type='authorization-code', redirect_uris='http://127.0.0.1/cb'); "
        f"AccessToken.objects.create(user=user, application=app, token={toolkit_token!r}, scope='mcp', "
        f"resource=[{ours_url!r}], expires=timezone.now() + timedelta(hours=1))"))
    daphne = str(Path(sys.executable).with_name("daphne"))
    uvicorn = str(Path(sys.executable).with_name("uvicorn"))
    servers = []
    try:
        def start_ours(name, port, auth, **settings):
            extra = {"MCP_AUTH": auth, "MCP_TRANSPORT_JSON": json.dumps({"AUTH_VALIDATORS": validators, **settings})}
            servers.append(Server(name, [daphne, "-v", "0", "-b", "127.0.0.1", "-p", str(port),
                                         "mcpserver.asgi:application"], {**env, **extra}, port).wait())
            return servers[-1]

        def start_sdk(auth):
            port = sdk_ports[auth]
            extra = {"AUTH": auth, "RESOURCE": f"http://127.0.0.1:{port}/mcp", "ISSUER": ISSUER,
                     "JWKS_URL": jwks.url, "STATIC_TOKEN": "sdk-static-" + "x" * 32}
            servers.append(Server(f"sdk-{auth}", [uvicorn, "server_sdk_auth:app", "--app-dir", "bench", "--host",
                                                  "127.0.0.1", "--port", str(port), "--workers", "1", "--loop",
                                                  "uvloop", "--http", "httptools", "--log-level", "warning"],
                                  {**env, **extra}, port).wait())
            return servers[-1]

        ours_open, ours_auth = start_ours("ours-open", open_port, "off"), start_ours("ours-auth", ours_port, "on")
        ours_mem = start_ours("ours-mem", mem_port, "on", AUTH_REVOCABLE_MEMORY_SECONDS=30)
        sdk = {auth: start_sdk(auth) for auth in sdk_ports}
        targets = [("ours-open", ours_open, None), ("ours-static", ours_auth, static_token),
                   ("ours-toolkit", ours_auth, toolkit_token), ("ours-jwt", ours_auth, jwks.token(ours_url)),
                   ("ours-static-mem", ours_mem, static_token),
                   ("sdk-open", sdk["off"], None), ("sdk-static", sdk["static"], "sdk-static-" + "x" * 32),
                   ("sdk-jwt", sdk["jwt"], jwks.token(sdk["jwt"].url))]
        client = redis.Redis.from_url(embedded.url)
        results = {}
        for repeat in range(args.repeat):
            order = targets if repeat % 2 == 0 else list(reversed(targets))
            for target in order:
                row = measure(target, args, client)
                results.setdefault(row["target"], []).append(row)
                print(json.dumps(row), file=sys.stderr, flush=True)
        if results:
            print_table(results, args)
        micro_env = {**env, "MCP_AUTH": "on", "MCP_TRANSPORT_JSON": json.dumps({"AUTH_VALIDATORS": validators}),
                     "BENCH_TOKENS": json.dumps({"static": static_token, "toolkit": toolkit_token,
                                                 "jwt": jwks.token(ours_url)}), "BENCH_RESOURCE": ours_url}
        done = subprocess.run([sys.executable, __file__, "--micro-child"], env=micro_env, cwd=ROOT,
                              capture_output=True, text=True, timeout=600)
        print(done.stdout, done.stderr[-3000:] if done.returncode else "")
    finally:
        for server in servers:
            server.stop()
        jwks.httpd.shutdown()
        embedded.stop()


def print_table(results, args):
    def mid(rows, key):
        values = [r[key] for r in rows if r[key] is not None]
        return statistics.median(values) if values else None

    base = {"ours": mid(results["ours-open"], "server_cpu_us_per_call"),
            "sdk": mid(results["sdk-open"], "server_cpu_us_per_call")}
    print(f"\n{args.clients} clients, {args.seconds:g} s after {args.warmup:g} s warm-up, {args.repeat} repeats "
          "(medians; CPU per call of the server process; Redis separately for ours)\n")
    print("| target | calls/s | p50 ms | p99 ms | server CPU µs/call | vs its open server | Redis CPU µs/call "
          "| errors |")
    print("|---|---|---|---|---|---|---|---|")
    for name, rows in results.items():
        cpu = mid(rows, "server_cpu_us_per_call")
        side = base["ours" if name.startswith("ours") else "sdk"]
        redis_cpu_text = f"{mid(rows, 'redis_cpu_us_per_call'):.0f}" if name.startswith("ours") else "-"
        print(f"| {name} | {mid(rows, 'calls_per_s'):.0f} | {mid(rows, 'p50_ms'):.2f} | {mid(rows, 'p99_ms'):.2f} | "
              f"{cpu:.0f} | {cpu - side:+.0f} | {redis_cpu_text} | {sum(r['errors'] for r in rows)} |")


if __name__ == "__main__":
    main()
