"""Calls in flight while something breaks, each read to its end in a thread of its own, as a
patient client would: a 2025-11-25 call resumes with Last-Event-ID on the next server whenever its
stream ends, breaks or only keeps alive; a 2026-07-28 task is polled on the next server; a refused
request (503, connection refused) is sent again. What each call saw is recorded, not asserted:
the master-kill tests assert on it, bench/chaos.py counts it.

No relative imports: bench/chaos.py imports this file by path.
"""
import http.client
import itertools
import json
import secrets
import threading
import time

from mcp_transport.testing import HttpClient, ModernClient

TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}}
#: How long a stream may carry nothing but keep-alives before the client gives it up and resumes
#: (longer than the keep-alive interval: a working follower sends progress well before).
QUIET_SECONDS = 20.0
BROKEN = (OSError, http.client.HTTPException, ValueError)


class _Refused(Exception):
    """The server did not take the request (503 or another non-200): send it again."""


class InFlight:
    """One call in a thread: ``outcome()`` once it ended, ``progress`` (its reports in order),
    ``answers`` (every response to its id), ``started`` (a server took it)."""

    era = kind = ""

    def __init__(self, urls, name, deadline=120.0, **arguments):
        self.urls, self.name, self.arguments, self.deadline = list(urls), name, arguments, deadline
        self.steps = arguments.get("steps")
        self.progress, self.answers, self.notes = [], [], []
        self.started = self.broken = False
        self.error = None
        self.first_progress = threading.Event()
        self._servers = itertools.cycle(self.urls)
        self._ends = time.monotonic() + deadline
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def _run(self):
        try:
            self.run()
        except Exception as exc:  # counted by the caller
            self.error = exc
        finally:
            self.first_progress.set()

    def next_url(self):
        return next(self._servers)

    def retrying(self, attempt, what):
        """``attempt()`` until it returns, sent again on refusals and broken connections."""
        while True:
            try:
                return attempt()
            except (_Refused, *BROKEN) as exc:
                if time.monotonic() > self._ends:
                    raise TimeoutError(f"{what}: refused until the deadline ({exc!r})") from exc
                time.sleep(0.3)

    def record(self, message, request_id):
        if message.get("method") == "notifications/progress":
            self.progress.append(message["params"]["progress"])
            self.first_progress.set()
        elif message.get("id") == request_id and "method" not in message:
            self.answers.append(message)

    def join(self, timeout=None):
        self.thread.join(self.deadline * 2 if timeout is None else timeout)

    def outcome(self):
        """result, error (answered with an error: its text in ``notes``), unanswered, twice,
        unstarted, broken (an era without resumption lost its connection) or failed (the client)."""
        if self.thread.is_alive():
            return "unanswered"
        if len(self.answers) > 1:
            return "twice"
        if self.answers:
            answer = self.answers[0]
            if "error" in answer or answer["result"].get("isError"):
                self.notes.append(json.dumps(answer)[:300])
                return "error"
            if self.whole(answer["result"]):
                return "result"
            self.notes.append(f"not its result: {json.dumps(answer)[:200]}")
            return "error"
        if not self.started:
            return "unstarted"
        if self.broken:
            return "broken"
        if self.error is not None:
            self.notes.append(repr(self.error)[:300])
            return "unanswered" if isinstance(self.error, TimeoutError) else "failed"
        return "unanswered"

    def whole(self, result):
        """The example tools' answer once all their steps ran: ``done N``, or the ``tick_*``
        jobs' count as structured content."""
        return _text(result) == f"done {self.steps}" or result.get("structuredContent") == {"result": self.steps}

    def own_progress(self):
        """The tool's own reports (a worker's heartbeat progress between them is fractional)."""
        return [value for value in self.progress if value == int(value)]

    def lost_and_duplicated(self):
        """(reports never seen, reports seen more than once) of a call answered with its result."""
        own = self.own_progress()
        return len(set(range(1, self.steps + 1)) - set(own)), len(own) - len(set(own))


def _text(result):
    content = result.get("content") or [{}]
    return content[0].get("text")


class LegacyCall(InFlight):
    """A 2025-11-25 ``tools/call`` with a progress token on a session of its own."""

    era = "2025-11-25"

    def __init__(self, urls, name, deadline=120.0, **arguments):
        super().__init__(urls, name, deadline, **arguments)
        self.kind = "inline" if name == "slow_progress" else "background"
        if name.endswith("_idempotent"):
            self.kind += ", idempotent"
        #: Times the client resumed (the stream ended, broke or only kept alive).
        self.resumed = 0

    def run(self):
        client = HttpClient(self.next_url())
        self.retrying(lambda: _initialize(client), "initialize")
        self.client = client
        message = client.message("tools/call", {"name": self.name, "arguments": self.arguments,
                                                "_meta": {"progressToken": secrets.token_hex(4)}})
        stream = self.retrying(lambda: _opened(client.on(self.next_url()).stream("POST", message,
                                                                                  timeout=self.deadline)), "POST")
        self.started = True
        last_event_id = self._follow(stream, message["id"])
        while not self.answers:
            if not last_event_id:
                self.broken = True  # broke before its first event: nothing to resume from
                return
            if time.monotonic() > self._ends:
                raise TimeoutError("no answer before the deadline")
            self.resumed += 1
            stream = self.retrying(lambda: _opened(client.on(self.next_url()).resume(last_event_id,
                                                                                     timeout=self.deadline)),
                                   "resume")
            last_event_id = self._follow(stream, message["id"]) or last_event_id

    def _follow(self, stream, request_id):
        """Reads until the answer, the stream's end or break, or QUIET_SECONDS of keep-alives;
        returns the last event id."""
        try:
            quiet_since = time.monotonic()
            while (event := stream.next_event(timeout=QUIET_SECONDS)) is not None:
                if event.data:
                    quiet_since = time.monotonic()
                    self.record(json.loads(event.data), request_id)
                    if self.answers:
                        break
                elif time.monotonic() - quiet_since > QUIET_SECONDS:
                    break  # keep-alives only: give it up and resume
        except BROKEN:
            pass
        finally:
            stream.close()
        return stream.last_event_id


def _initialize(client):
    try:
        client.initialize()
    except AssertionError as exc:  # a 503 while the store fails over
        raise _Refused(str(exc)) from exc


def _opened(stream):
    if stream.status != 200:
        stream.close()
        raise _Refused(stream.status)
    return stream


class ModernCall(InFlight):
    """A 2026-07-28 inline ``tools/call`` with a progress token: the era has no resumption, so a
    connection lost after the server took the call is ``broken``."""

    era, kind = "2026-07-28", "inline"

    def run(self):
        client = ModernClient(self.next_url())
        params = {"name": self.name, "arguments": self.arguments, "_meta": {"progressToken": secrets.token_hex(4)}}
        message = client.modern_message("tools/call", params)
        stream = self.retrying(lambda: _opened(client.stream("POST", message, client.modern_headers(message),
                                                             session=False, timeout=self.deadline)), "POST")
        self.started = True
        try:
            while (event := stream.next_event(timeout=self.deadline)) is not None:
                if event.data:
                    self.record(json.loads(event.data), message["id"])
                    if self.answers:
                        return
        except BROKEN:
            pass
        finally:
            stream.close()
        self.broken = True


class ModernTask(InFlight):
    """A 2026-07-28 background ``tools/call`` through the tasks extension, polled with
    ``tasks/get`` on the next server until it ended."""

    era, kind = "2026-07-28", "task"
    POLL_SECONDS = 0.3

    def run(self):
        created = self.retrying(lambda: self._post(self.next_url(), "tools/call",
                                                   {"name": self.name, "arguments": self.arguments}), "tools/call")
        self.started = True
        self.task_id = created["taskId"]
        self.first_progress.set()
        while True:
            task = self.retrying(lambda: self._post(self.next_url(), "tasks/get", {"taskId": self.task_id}),
                                 "tasks/get")
            if task["status"] in ("completed", "failed", "cancelled"):
                self.answers.append({"id": self.task_id, "result": task.get("result") or {
                    "isError": True, "content": [{"type": "text", "text": task.get("statusMessage", task["status"])}]}})
                return
            if time.monotonic() > self._ends:
                raise TimeoutError(f"task still {task['status']} at the deadline")
            time.sleep(self.POLL_SECONDS)

    @staticmethod
    def _post(url, method, params):
        reply = ModernClient(url, TASKS).post(method, params)
        if reply.status != 200:
            raise _Refused(f"{reply.status} {reply.body[:200]!r}")
        body = reply.json
        if "error" in body:
            raise _Refused(body["error"])  # e.g. the store unavailable: asked again
        return body["result"]


def first_answer_seconds(url, era="2025-11-25", deadline=60.0):
    """Seconds until an echo on ``url`` is answered (a new session each try in 2025-11-25)."""
    began = time.monotonic()
    while True:
        try:
            if echo(url, era):
                return time.monotonic() - began
        except (AssertionError, *BROKEN):
            pass
        if time.monotonic() - began > deadline:
            raise TimeoutError(f"no echo answered on {url} in {deadline} s")
        time.sleep(0.1)


def echo(url, era="2025-11-25"):
    """One echo call (a new session in 2025-11-25): True when answered with its text."""
    text = secrets.token_hex(4)
    params = {"name": "echo", "arguments": {"text": text}}
    if era == "2025-11-25":
        client = HttpClient(url)
        client.initialize()
        answer = client.call("tools/call", params)
    else:
        reply = ModernClient(url).post("tools/call", params)
        answer = reply.json if reply.status == 200 else {}
    return _text(answer.get("result", {})) == text


def cancel_crosses_processes(url, other_url):
    """A 2025-11-25 cancel sent to ``other_url`` stops a tool running on ``url``: its stream ends
    without a result, long before the tool's 100 steps."""
    first = HttpClient(url)
    first.initialize()
    call = first.message("tools/call", {"name": "slow_progress", "arguments": {"steps": 100, "interval_ms": 50},
                                         "_meta": {"progressToken": 1}})
    stream = first.stream("POST", call)
    stream.next_event()  # priming
    stream.next_event()  # first progress: the tool runs
    cancel = first.message("notifications/cancelled", {"requestId": call["id"]}, request_id=False)
    assert first.on(other_url).request("POST", cancel).status == 202
    rest = stream.messages(timeout=10)
    assert all("result" not in m and "error" not in m for m in rest)
    assert len(rest) < 60


def delete_crosses_processes(url, other_url):
    """A DELETE on ``other_url`` ends the session for ``url`` too."""
    first = HttpClient(url)
    first.initialize()
    assert first.on(other_url).delete().status == 200  # was 500 on the Cluster: a pipelined MGET
    assert first.request("POST", first.message("ping")).status == 404


def worker_gave_up(worker) -> str:
    """The end of a worker's log from Celery's "Unrecoverable error" on, or "" if it logged none:
    a worker that logs one stops once its running tasks end, and takes no job from then on."""
    log = worker.log()
    at = log.find("Unrecoverable error")
    return log[at:at + 3000] if at >= 0 else ""
