"""Chaos: minutes of mixed load in both eras with random infrastructure faults, counted.

For each topology asked for (``plain``: one Redis for the app and the broker; ``sentinel``: a
private Sentinel set, kombu's Sentinel broker; ``cluster``: a private six-node Cluster, RabbitMQ
as the broker), this starts two daphnes and a four-slot Celery worker of the example project and
keeps in flight, all along:

- 2025-11-25: inline calls with progress (``slow_progress``) and background calls with progress
  (``slow_job``, and ``tick_job_idempotent``, which a lost worker's successor runs again), each on
  a session of its own; when a stream ends, breaks or only keeps alive,
  the client resumes with Last-Event-ID on the other daphne (tests/integration/load.py);
- 2026-07-28: inline calls with progress, and background calls through the tasks extension
  (created, then ``tasks/get`` on either daphne until they end);
- an echo every 200 ms per era.

Meanwhile, one fault at a time in a random order (every kind the topology allows, then again),
with a calm stretch between: Redis paused 10 s (SIGSTOP/SIGCONT), Redis restarted empty after
5 s, the Sentinel master killed, the Cluster master of the app's keys killed, a daphne killed -9
and started again on its port, the worker killed -9 (its whole process group) and started again,
the database cut for 20 s (PostgreSQL behind a TCP proxy of this script, which drops every
connection and refuses new ones; with SQLite there is no database cut). After each fault: seconds
until an echo works on both daphnes in both eras, and whether a cancel and a DELETE sent to the
other daphne still work.

Each call is counted under every fault whose window (from its start to the end of the recovery
check) overlaps the call's life, or under "none": started, answered with its result, answered
with an error, never answered, answered twice, broken (a 2026-07-28 inline call whose connection
went: that era has no resumption), and progress reports lost and duplicated.

    .venv/bin/python bench/chaos.py --minutes 3 --topology plain sentinel cluster \\
        --database-url postgres://postgres@127.0.0.1:5432/chaos_db
"""
import argparse
import collections
import json
import os
import random
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "integration")]

from load import (LegacyCall, ModernCall, ModernTask, cancel_crosses_processes,  # noqa: E402
                  delete_crosses_processes, first_answer_seconds)

from mcp_transport.testing import HttpClient, LiveServer, LiveWorker, ModernClient  # noqa: E402
from mcpserver.embedded_redis import EmbeddedRedis  # noqa: E402
from mcpserver.redis_topologies import RedisClusterSet, SentinelSet, key_slot  # noqa: E402

RABBITMQ = os.environ.get("CHAOS_RABBITMQ_URL", "amqp://guest:guest@127.0.0.1:5672//")
FAULTS = {"plain": ["redis_pause", "redis_restart_empty", "daphne_kill", "worker_kill", "database_cut"],
          "sentinel": ["sentinel_master_kill", "daphne_kill", "worker_kill", "database_cut"],
          "cluster": ["cluster_master_kill", "daphne_kill", "worker_kill", "database_cut"]}
#: What runs at once: (client class, tool, arguments); about 9 s a call.
MIX = [(LegacyCall, "slow_progress", {"steps": 30, "interval_ms": 300})] * 3 + \
      [(LegacyCall, "slow_job", {"steps": 15, "interval_ms": 600})] * 2 + \
      [(LegacyCall, "tick_job_idempotent", {"key": "chaos", "steps": 15, "interval_ms": 600})] + \
      [(ModernCall, "slow_progress", {"steps": 30, "interval_ms": 300})] * 2 + \
      [(ModernTask, "slow_job", {"steps": 15, "interval_ms": 600})]
OUTCOMES = ["result", "error", "unanswered", "twice", "broken", "unstarted", "failed"]


def say(*parts):
    print(time.strftime("%H:%M:%S"), *parts, file=sys.stderr, flush=True)


# -- the stack ------------------------------------------------------------------------------------

class Daphne(LiveServer):
    """A daphne that starts again on the port it had (clients keep their URLs)."""

    def start(self, timeout=30.0):
        if self.port is None:
            return super().start(timeout)
        daphne = Path(sys.executable).with_name("daphne")
        self._spawn([str(daphne), "-v", "1", "-b", "127.0.0.1", "-p", str(self.port), self.application], "daphne-")
        self._wait_until_listening(timeout)
        return self


class DatabaseProxy:
    """A TCP proxy in front of PostgreSQL; ``cut()`` drops every connection and refuses new
    ones (accepted and closed at once) until ``restore()``: a database that went away."""

    def __init__(self, host, port):
        self.target = (host, port)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.is_cut = False
        self.pairs, self.lock = [], threading.Lock()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            if self.is_cut:
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self.lock:
                self.pairs.append((client, upstream))
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source, sink):
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        self.is_cut = True
        with self.lock:
            pairs, self.pairs = self.pairs, []
        for pair in pairs:
            for end in pair:
                try:
                    end.shutdown(socket.SHUT_RDWR)
                    end.close()
                except OSError:
                    pass

    def restore(self):
        self.is_cut = False

    def close(self):
        self.cut()
        self.listener.close()


class Stack:
    """Redis of the topology, the database (through the proxy when PostgreSQL), two daphnes, a worker."""

    def __init__(self, topology, database_url):
        self.topology, self.database_url = topology, database_url
        self.redis = self.proxy = self.worker = None
        self.servers = []

    def start(self):
        if self.topology == "plain":
            self.redis = EmbeddedRedis().start()
        else:
            self.redis = (SentinelSet() if self.topology == "sentinel" else RedisClusterSet()).start()
        self.prefix = f"chaos{secrets.token_hex(3)}"
        env = {"REDIS_URL": self.redis.url, "MCP_KEY_PREFIX": self.prefix, "CELERY_QUEUE": self.prefix,
               "DJANGO_SETTINGS_MODULE": "mcpserver.settings", "PYTHONPATH": str(ROOT),
               "MCP_MAX_SESSIONS_PER_ADDRESS": "1000000", "DJANGO_CONN_MAX_AGE": "0",
               "MCP_REQUEST_RATE_LIMIT": "off", "MCP_SESSION_OPEN_RATE": "off",
               "DATABASE_URL": self._database(), "LOG_LEVEL": "INFO",
               "MCP_TRANSPORT_JSON": json.dumps({"HEARTBEAT_SECONDS": 0.5})}
        env.setdefault("DJANGO_SECRET_KEY", secrets.token_urlsafe(50))
        if self.topology == "plain":
            env["CELERY_BROKER_URL"] = self.redis.url
        elif self.topology == "cluster":
            env["CELERY_BROKER_URL"] = RABBITMQ
        self.env = env
        subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v", "0"], cwd=ROOT,
                       env={**os.environ, **env}, check=True)
        for _ in range(2):  # listed before they start: an interrupted start still stops them
            self.servers.append(Daphne(env=env, cwd=ROOT))
            self.servers[-1].start()
        self.start_worker()
        return self

    def _database(self):
        if not self.database_url.startswith("postgres"):
            return self.database_url or f"sqlite:///{tempfile.mkdtemp()}/chaos.sqlite3"
        from urllib.parse import urlsplit, urlunsplit  # noqa: PLC0415

        parts = urlsplit(self.database_url)
        self.proxy = DatabaseProxy(parts.hostname, parts.port or 5432)
        netloc = parts.netloc.rsplit("@", 1)[0] + "@" if "@" in parts.netloc else ""
        return urlunsplit(parts._replace(netloc=f"{netloc}127.0.0.1:{self.proxy.port}"))

    def start_worker(self):
        self.worker = LiveWorker(queue=self.prefix, env=self.env, cwd=ROOT, concurrency=4)
        self.worker.start()

    @property
    def urls(self):
        return [server.url for server in self.servers]

    def stop(self):
        for process in (self.worker, *self.servers):
            if process is not None:
                process.stop()
        if self.redis is not None:
            if getattr(self.redis, "process", None) is not None and self.redis.process.poll() is None:
                os.kill(self.redis.process.pid, signal.SIGCONT)
            self.redis.stop()
        if self.proxy is not None:
            self.proxy.close()


# -- the faults -----------------------------------------------------------------------------------

def redis_pause(stack):
    os.kill(stack.redis.process.pid, signal.SIGSTOP)
    time.sleep(10)
    os.kill(stack.redis.process.pid, signal.SIGCONT)


def redis_restart_empty(stack):
    import shutil  # noqa: PLC0415

    stack.redis.process.kill()
    stack.redis.process.wait()
    stack.redis.process = None
    shutil.rmtree(stack.redis.dir, ignore_errors=True)
    time.sleep(5)
    stack.redis.start()


def sentinel_master_kill(stack):
    old, _new = stack.redis.kill_master()
    stack.redis.restart(old)


def cluster_master_kill(stack):
    old, _new = stack.redis.kill_master(key_slot("{" + stack.prefix + "}"))
    stack.redis.restart(old)


def daphne_kill(stack):
    server = random.choice(stack.servers)
    server.kill()
    time.sleep(2)
    server.start()


def worker_kill(stack):
    stack.worker.kill()
    time.sleep(2)
    stack.start_worker()


def database_cut(stack):
    stack.proxy.cut()
    time.sleep(20)
    stack.proxy.restore()


def recovery(stack):
    """(seconds until echoes work on both daphnes in both eras, cancel ok, DELETE ok)."""
    began = time.monotonic()
    for url in stack.urls:
        for era in ("2025-11-25", "2026-07-28"):
            first_answer_seconds(url, era)
    back = time.monotonic() - began
    checks = []
    for check in (cancel_crosses_processes, delete_crosses_processes):
        try:
            check(*stack.urls)
            checks.append(True)
        except Exception as exc:  # counted
            say(f"  {check.__name__} failed: {exc!r}")
            checks.append(False)
    return back, *checks


# -- the load -------------------------------------------------------------------------------------

class Load:
    def __init__(self, stack):
        self.stack, self.calls, self.stopping = stack, [], threading.Event()
        self.echoes = {era: {"sent": 0, "failed": []} for era in ("2025-11-25", "2026-07-28")}
        self.threads = [threading.Thread(target=self._slot, args=(spec, index), daemon=True)
                        for index, spec in enumerate(MIX)]
        self.threads += [threading.Thread(target=self._echo, args=(era,), daemon=True) for era in self.echoes]

    def start(self):
        for thread in self.threads:
            thread.start()

    def _slot(self, spec, index):
        kind, tool, arguments = spec
        while not self.stopping.is_set():
            urls = self.stack.urls if index % 2 else self.stack.urls[::-1]
            call = kind(urls, tool, **arguments)
            call.began = time.monotonic()
            self.calls.append(call)
            call.start().join()
            call.ended = time.monotonic()

    def _echo(self, era):
        """An echo every 200 ms on one session (2025-11-25), alternating daphnes; a refused
        connection (a killed daphne) goes to the other one, as a load balancer would."""
        tally, session = self.echoes[era], None
        while not self.stopping.wait(0.2):
            tally["sent"] += 1
            urls = self.stack.urls[tally["sent"] % 2:] + self.stack.urls[:tally["sent"] % 2]
            try:
                if era == "2025-11-25" and session is None:
                    session = HttpClient(urls[0])
                    session.initialize()
                reason = _echo_once(session, urls, era)
            except Exception as exc:  # noqa: BLE001 (counted)
                reason = type(exc).__name__
            if reason == "404":
                session = None  # the session is gone: a new one next time
            if reason:
                tally["failed"].append((time.monotonic(), reason))

    def stop(self):
        self.stopping.set()
        for call in self.calls:
            call.join()
        for thread in self.threads:
            thread.join(300)


def _echo_once(session, urls, era):
    """None when the echo came back, else why not."""
    text = secrets.token_hex(4)
    params = {"name": "echo", "arguments": {"text": text}}
    for url in urls:
        try:
            if era == "2025-11-25":
                client = session.on(url)
                reply = client.request("POST", client.message("tools/call", params), timeout=30)
            else:
                reply = ModernClient(url).post("tools/call", params)
        except ConnectionRefusedError:
            continue
        if reply.status != 200:
            return str(reply.status)
        body = reply.json if reply.content_type == "application/json" else \
            json.loads([line for line in reply.body.decode().splitlines() if line.startswith("data: {")][-1][6:])
        return None if (body.get("result", {}).get("content") or [{}])[0].get("text") == text else json.dumps(body)[:120]
    return "refused by both"


def run(topology, minutes, database_url, calm):
    kinds = [kind for kind in FAULTS[topology] if kind != "database_cut" or database_url.startswith("postgres")]
    stack = Stack(topology, database_url)
    faults = []
    try:
        stack.start()
        say(f"{topology}: stack up ({stack.urls}); load for {minutes} min with faults {kinds}")
        load = Load(stack)
        load.start()
        ends = time.monotonic() + minutes * 60
        order = []
        while time.monotonic() + 30 < ends:
            time.sleep(random.uniform(*calm))
            order = order or random.sample(kinds, len(kinds))
            kind = order.pop()
            began = time.monotonic()
            say(f"  fault {kind}")
            globals()[kind](stack)
            healed = time.monotonic()
            back, cancel_ok, delete_ok = recovery(stack)
            faults.append({"kind": kind, "began": began, "healed": healed, "ended": time.monotonic(),
                           "back_seconds": back, "cancel_ok": cancel_ok, "delete_ok": delete_ok})
            say(f"  {kind}: {healed - began:.1f} s, echoes on every daphne and era {back:.2f} s after; "
                f"cancel {'ok' if cancel_ok else 'FAILED'}, DELETE {'ok' if delete_ok else 'FAILED'}")
        while time.monotonic() < ends:
            time.sleep(1)
        say("  stopping the load; waiting for every call to end")
        load.stop()
        return tally(topology, load, faults)
    finally:
        stack.stop()


def tally(topology, load, faults):
    rows = collections.OrderedDict()
    for call in load.calls:
        overlapping = [f["kind"] for f in faults if call.began < f["ended"] and call.ended > f["began"]] or ["none"]
        outcome = call.outcome()
        lost, duplicated = call.lost_and_duplicated() if call.kind != "task" else (0, 0)
        if outcome != "result":
            lost = 0  # a tool that did not finish reported what it did
            duplicated = len(call.own_progress()) - len(set(call.own_progress()))
        for kind in dict.fromkeys(overlapping):
            row = rows.setdefault((kind, call.era, call.kind), collections.Counter())
            row["started"] += call.started
            row[outcome] += 1
            row["progress"] += len(call.own_progress())
            row["lost"] += lost
            row["duplicated"] += duplicated
            if outcome != "result":
                row["notes"] = row.get("notes", []) + [_note(call, outcome, faults)]
    echoes = {era: {"sent": tally_["sent"], "failed": len(tally_["failed"]),
                    "failed_during": collections.Counter(
                        f'{next((f["kind"] for f in faults if f["began"] <= t <= f["ended"]), "none")} ({reason})'
                        for t, reason in tally_["failed"])}
              for era, tally_ in load.echoes.items()}
    return {"topology": topology, "faults": [{k: v for k, v in f.items() if k not in ("began", "ended", "healed")}
                                             | {"seconds": round(f["healed"] - f["began"], 1)} for f in faults],
            "rows": [{"fault": k[0], "era": k[1], "kind": k[2], **dict(v)} for k, v in rows.items()],
            "echoes": echoes}


def _note(call, outcome, faults):
    """What a call that did not end with its result saw, timed from the fault's start."""
    fault = next((f for f in faults if call.began < f["ended"] and call.ended > f["began"]), None)
    when = "" if fault is None else (f"{fault['kind']}: started {call.began - fault['began']:+.1f} s, "
                                     f"ended {call.ended - fault['began']:+.1f} s from the fault")
    return f"{call.era} {call.kind} {outcome} ({when}): {(call.notes[:1] or [''])[0]}"


def markdown(report):
    lines = [f"### {report['topology']}", "",
             "| fault | era | call | started | result | error | unanswered | twice | broken | unstarted "
             "| progress seen | lost | duplicated |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in sorted(report["rows"], key=lambda r: (r["fault"], r["era"], r["kind"])):
        lines.append(f"| {row['fault']} | {row['era']} | {row['kind']} | {row.get('started', 0)} | "
                     + " | ".join(str(row.get(key, 0)) for key in ("result", "error", "unanswered", "twice",
                                                                   "broken", "unstarted", "progress", "lost",
                                                                   "duplicated")) + " |")
    lines += ["", "| fault | lasted s | echoes back on every daphne and era, s | cancel across | DELETE across |",
              "|---|---|---|---|---|"]
    for fault in report["faults"]:
        lines.append(f"| {fault['kind']} | {fault['seconds']} | {fault['back_seconds']:.2f} | "
                     f"{'ok' if fault['cancel_ok'] else 'FAILED'} | {'ok' if fault['delete_ok'] else 'FAILED'} |")
    for era, echoes in report["echoes"].items():
        during = ", ".join(f"{count} during {what}" for what, count in echoes["failed_during"].items())
        lines.append(f"\nEchoes {era}: {echoes['sent']} sent, {echoes['failed']} failed{': ' + during if during else ''}")
    notes = [note for row in report["rows"] for note in row.get("notes", [])]
    if notes:
        lines += ["", "Answers other than the result (first of each call, clipped):", ""]
        lines += [f"- {note}" for note in dict.fromkeys(notes)]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topology", nargs="+", choices=list(FAULTS), default=list(FAULTS))
    parser.add_argument("--minutes", type=float, default=3)
    parser.add_argument("--database-url", default=os.environ.get("DATABASE_URL", ""),
                        help="PostgreSQL (cut through a proxy) or SQLite (no database cut); default a SQLite file")
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--calm", type=float, nargs=2, default=(12, 20), help="seconds between faults: min max")
    parser.add_argument("--json", help="write the counts here too")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(10**6)
    random.seed(seed)
    say(f"seed {seed}; load average {os.getloadavg()}")
    print(f"seed {seed}, {args.minutes:g} min per topology", flush=True)
    reports = []
    for topology in args.topology:
        reports.append(run(topology, args.minutes, args.database_url, args.calm))
        print("\n" + markdown(reports[-1]), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(reports, indent=1, default=str))
    bad = sum(row.get(key, 0) for report in reports for row in report["rows"]
              for key in ("unanswered", "twice", "failed", "lost", "duplicated"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
