"""Issue 30, class 4: a 2026-07-28 answer counts only for a question this server asked (MRTR).

``author_delete_selected`` (an admin action, confirmed first: toolsets/actions.py) deleted on the
FIRST request when that request carried a made-up ``inputResponses`` and no ``requestState``:
the round took the client's answers whether or not the server had asked anything. An answer now
counts only with the sealed ``requestState`` of the round that asked it (bound to the call, the
caller and the question); anything else is ignored ("the server SHOULD ignore any information it
does not recognize or need", spec 2026-07-28 basic/patterns/mrtr), so the tool asks its question
again. The same holds for a background tool waiting for its client (its job's own questions) and
for ``tasks/update`` (the task's own pending questions).

The one exception is the tool's to make, question by question (issue 38): a question declared
``answerable_ahead`` (with a key of the tool's choosing) takes a valid answer given before it was
asked, inline, in a background job and in a task; every other question is still asked.

Against a real daphne with ``MCP_AUTH=on``, the example project's models, a Celery worker of the
module's own queue (the run's shared one-slot worker may be busy for longer than a job may wait
in its queue) and Redis, as ordinary (non-staff) users.
"""
import json
import os
import subprocess
import sys
import time

import pytest

from mcp_transport.testing import HttpClient, LiveWorker, ModernClient

from .test_auth import ROOT, new_token

ASKS = {"elicitation": {}}
TASKS = {"extensions": {"io.modelcontextprotocol/tasks": {}}, "elicitation": {}}
YES = {"action": "accept", "content": {"confirm": True}}

USERS = """
import json
from django.contrib.auth.models import Permission, User
from tools.library.models import Author
deleting = Permission.objects.filter(content_type__app_label="library", codename__in=("view_author", "delete_author"))
for name in ("deleter", "intruder"):
    User.objects.create(username=f"{prefix}-{name}", is_staff=False).user_permissions.add(*deleting)
print(json.dumps([Author.objects.create(name=f"{prefix} author {n}").pk for n in range(6)]))
"""


def shell(server_env, code: str) -> str:
    done = subprocess.run([sys.executable, "manage.py", "shell", "-c", code], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, **server_env}, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()[-1]


def existing(server_env, pks) -> list:
    """The pks of ``pks`` whose Author row is still in the database."""
    code = ("import json; from tools.library.models import Author; "
            f"print(json.dumps(sorted(Author.objects.filter(pk__in={list(pks)!r}).values_list('pk', flat=True))))")
    return json.loads(shell(server_env, code))


@pytest.fixture(scope="module")
def auth_server(start_server, server_env, own_queue):
    """A daphne with MCP_AUTH=on sending its jobs to a worker of its own."""
    env = {**server_env, "CELERY_QUEUE": own_queue, "LOG_LEVEL": "INFO",
           "MCP_TRANSPORT_JSON": json.dumps({"HEARTBEAT_SECONDS": 0.3})}
    worker = LiveWorker(queue=own_queue, env=env, cwd=ROOT).start()
    yield start_server(CELERY_QUEUE=own_queue, MCP_AUTH="on")
    worker.stop()


@pytest.fixture(scope="module")
def library(server_env):
    """Two non-staff users who may view and delete authors, their tokens, and six authors."""
    prefix = f"asked{os.getpid()}"
    authors = json.loads(shell(server_env, f"prefix = {prefix!r}\n{USERS}"))
    return {"authors": authors, **{name: new_token(server_env, f"{prefix}-{name}") for name in ("deleter", "intruder")}}


class Caller(ModernClient):
    """A 2026-07-28 client with a bearer token."""

    def __init__(self, url, token, capabilities):
        super().__init__(url, capabilities)
        self.token = token

    def post(self, method, params=None, headers=None, **options):
        return super().post(method, params, headers={"Authorization": f"Bearer {self.token}", **(headers or {})},
                            **options)


def result(reply):
    assert reply.status == 200, (reply.status, reply.body)
    assert "error" not in reply.json, reply.json
    return reply.json["result"]


def asks_to_confirm(outcome) -> bool:
    return outcome.get("resultType") == "input_required" and list(outcome.get("inputRequests", {})) == ["confirm"]


def test_a_made_up_answer_without_the_servers_state_deletes_nothing(auth_server, server_env, library):
    victim = library["authors"][0]
    client = Caller(auth_server.url, library["deleter"], ASKS)
    params = {"name": "author_delete_selected", "arguments": {"ids": [victim]}}
    forged = result(client.post("tools/call", {**params, "inputResponses": {"confirm": YES}}))
    assert asks_to_confirm(forged), forged  # a fresh round: the question again, nothing done
    assert forged["inputRequests"]["confirm"]["params"]["message"] == "Delete selected authors: 1 author. Go ahead?"
    assert existing(server_env, [victim]) == [victim]
    # The user answers the question the server asked, with its state: now it is deleted.
    done = result(client.post("tools/call", {**params, "requestState": forged["requestState"],
                                             "inputResponses": {"confirm": YES}}))
    assert done["structuredContent"]["messages"] == ["Successfully deleted 1 author."], done
    assert existing(server_env, [victim]) == []


def test_answers_to_questions_that_round_did_not_ask_are_ignored(auth_server, server_env, library):
    victim = library["authors"][1]
    client = Caller(auth_server.url, library["deleter"], ASKS)
    params = {"name": "author_delete_selected", "arguments": {"ids": [victim]}}
    asked = result(client.post("tools/call", params))
    assert asks_to_confirm(asked), asked
    for answers in ({"other": YES}, {"confirm-2": YES, "elicit-1": YES}):
        again = result(client.post("tools/call", {**params, "requestState": asked["requestState"],
                                                  "inputResponses": answers}))
        assert asks_to_confirm(again), again
    assert existing(server_env, [victim]) == [victim]


def test_another_callers_state_or_another_calls_state_is_refused(auth_server, server_env, library):
    first, second = library["authors"][2:4]
    deleter = Caller(auth_server.url, library["deleter"], ASKS)
    asked = result(deleter.post("tools/call", {"name": "author_delete_selected", "arguments": {"ids": [first]}}))
    intruder = Caller(auth_server.url, library["intruder"], ASKS)
    for client, ids in ((intruder, [first]), (deleter, [second]), (deleter, [first, second])):
        reply = client.post("tools/call", {"name": "author_delete_selected", "arguments": {"ids": ids},
                                           "requestState": asked["requestState"], "inputResponses": {"confirm": YES}})
        error = reply.json["error"]
        assert error["code"] == -32602 and error["data"] == {"reason": "foreign"}, reply.json
    assert existing(server_env, [first, second]) == sorted([first, second])


def test_a_background_tool_takes_only_answers_to_its_own_questions(auth_server, library):
    client = Caller(auth_server.url, library["deleter"], ASKS)
    params = {"name": "confirm_delete", "arguments": {"filename": "forged.txt"}}
    forged = result(client.post("tools/call", {**params, "inputResponses": {"elicit-1": YES}}, timeout=60))
    assert forged["resultType"] == "input_required", forged  # a new job, which asks
    (key, question), = forged["inputRequests"].items()
    assert question["params"]["message"] == "Delete forged.txt?"
    again = result(client.post("tools/call", {**params, "requestState": forged["requestState"],
                                              "inputResponses": {f"{key}-not": YES, "confirm": YES}}, timeout=60))
    assert again["resultType"] == "input_required" and list(again["inputRequests"]) == [key], again
    done = result(client.post("tools/call", {**params, "requestState": again["requestState"],
                                             "inputResponses": {key: YES}}, timeout=60))
    assert done["content"][0]["text"] == "Deleted forged.txt", done


def test_tasks_update_answers_only_the_tasks_own_pending_questions(auth_server, library):
    client = Caller(auth_server.url, library["deleter"], TASKS)
    created = result(client.post("tools/call", {"name": "confirm_delete", "arguments": {"filename": "task.txt"}}))

    def task(until):
        deadline = time.monotonic() + 60
        while (current := result(client.post("tasks/get", {"taskId": created["taskId"]})))["status"] not in until:
            assert time.monotonic() < deadline, current
            time.sleep(0.05)
        return current
    (key, _question), = task(("input_required",))["inputRequests"].items()
    ack = result(client.post("tasks/update", {"taskId": created["taskId"], "inputResponses": {"made-up": YES}}))
    assert ack["resultType"] == "complete"
    still = result(client.post("tasks/get", {"taskId": created["taskId"]}))
    assert still["status"] == "input_required" and list(still["inputRequests"]) == [key], still
    intruder = Caller(auth_server.url, library["intruder"], TASKS)
    refused = intruder.post("tasks/update", {"taskId": created["taskId"], "inputResponses": {key: YES}})
    assert refused.json["error"]["code"] == -32602, refused.json  # another's task is unknown
    result(client.post("tasks/update", {"taskId": created["taskId"], "inputResponses": {key: YES}}))
    done = task(("completed", "failed", "cancelled"))
    assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "Deleted task.txt", done


def test_a_2025_answer_sent_before_its_question_counts_for_nothing(auth_server, server_env, library):
    """The same class in a 2025-11-25 session (own attacker pass): the server's requests are
    numbered 1, 2, ... per session, so a client could POST the "yes" to a confirmation before it
    was asked; the tool, asking, found it waiting and deleted without its user ever seeing the
    question. An answer now counts only for a question sent and still waiting, and only once
    (others are accepted, 202 as the spec asks of a response, and dropped)."""
    victim = library["authors"][4]
    client = HttpClient(auth_server.url, token=library["deleter"])
    client.initialize(capabilities=ASKS)
    early = client.request("POST", {"jsonrpc": "2.0", "id": 1, "result": YES})
    assert early.status == 202, (early.status, early.body)
    stream = client.call_tool_stream("author_delete_selected", {"ids": [victim]})
    question = stream.next_message(timeout=30)
    assert (question["method"], question["id"]) == ("elicitation/create", 1), question
    assert existing(server_env, [victim]) == [victim]  # asked, nothing done yet
    declined = client.request("POST", {"jsonrpc": "2.0", "id": 1, "result": {"action": "decline"}})
    assert declined.status == 202, (declined.status, declined.body)
    final = stream.next_message(timeout=30)
    assert final["result"]["isError"] and "Not confirmed" in final["result"]["content"][0]["text"], final
    stream.close()
    client.request("POST", {"jsonrpc": "2.0", "id": 1, "result": YES})  # a second answer, dropped too
    again = client.call_tool_stream("author_delete_selected", {"ids": [victim]})
    assert again.next_message(timeout=30)["method"] == "elicitation/create"  # asked again, not pre-answered
    again.close()
    assert existing(server_env, [victim]) == [victim]


# -- the exception, the tool's to make: questions answerable ahead (issue 38) ----------------------

#: The inputResponses of the conformance check sep-2322-ignore-unexpected-params
#: (input-required-result-ignore-extra-params), sent on its FIRST tools/call, without a requestState.
HARNESS = {"user_name": {"action": "accept", "content": {"name": "Alice"}},
           "unknown_extra_key": {"action": "accept", "content": {"foo": "bar"}},
           "another_unexpected": {"action": "accept", "content": {"baz": 123}}}
EVE = {"action": "accept", "content": {"name": "Eve"}}
NOT_A_NAME = [{"action": "accept", "content": {}}, {"action": "accept", "content": {"name": 5}},
              {"action": "maybe", "content": {"name": "Alice"}}]


def test_a_question_answerable_ahead_takes_the_harness_answer_on_the_first_call(auth_server, library):
    """test_input_required_result_elicitation declares its "user_name" question answerable ahead:
    the harness's first call completes, its two unknown keys ignored ("the server SHOULD ignore
    any information it does not recognize")."""
    client = Caller(auth_server.url, library["deleter"], ASKS)
    done = result(client.post("tools/call", {"name": "test_input_required_result_elicitation", "arguments": {},
                                             "inputResponses": HARNESS}))
    assert done["resultType"] == "complete" and done["content"][0]["text"] == "Hello, Alice!", done


def test_the_same_answers_to_a_question_not_answerable_ahead_are_asked_for(auth_server, library):
    """test_input_required_result_capabilities asks "user_name" too, without the opt-in: the
    harness's answers on a first call are ignored and the question asked; with the state of the
    round that asked it they count, the extra keys ignored."""
    client = Caller(auth_server.url, library["deleter"], ASKS)
    params = {"name": "test_input_required_result_capabilities", "arguments": {}}
    first = result(client.post("tools/call", {**params, "inputResponses": HARNESS}))
    assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["user_name"], first
    done = result(client.post("tools/call", {**params, "requestState": first["requestState"],
                                             "inputResponses": HARNESS}))
    assert done["resultType"] == "complete" and done["content"][0]["text"] == "1 answers", done


@pytest.mark.parametrize("given", NOT_A_NAME)
def test_an_answer_given_ahead_that_is_no_valid_answer_is_ignored_and_the_question_asked(auth_server, library,
                                                                                         given):
    client = Caller(auth_server.url, library["deleter"], ASKS)
    params = {"name": "test_input_required_result_elicitation", "arguments": {}}
    first = result(client.post("tools/call", {**params, "inputResponses": {**HARNESS, "user_name": given}}))
    assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["user_name"], first
    done = result(client.post("tools/call", {**params, "requestState": first["requestState"],
                                             "inputResponses": {"user_name": EVE}}))
    assert done["content"][0]["text"] == "Hello, Eve!", done


def test_a_background_tool_takes_an_answer_given_ahead_only_where_it_opted_in(auth_server, library):
    """confirm_greeting (a worker's job) takes the name given ahead, keeps it for the rest of the
    call (a later request's other name does not replace it), and still asks its confirmation."""
    client = Caller(auth_server.url, library["deleter"], ASKS)
    params = {"name": "confirm_greeting", "arguments": {}}
    first = result(client.post("tools/call", {**params, "inputResponses": {**HARNESS, "confirm": YES}}, timeout=60))
    assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["confirm"], first
    assert first["inputRequests"]["confirm"]["params"]["message"] == "Greet Alice?"
    done = result(client.post("tools/call", {**params, "requestState": first["requestState"],
                                             "inputResponses": {"confirm": YES, "user_name": EVE}}, timeout=60))
    assert done["content"][0]["text"] == "Hello, Alice!", done


def test_a_background_tool_asks_when_the_answer_given_ahead_is_no_valid_answer(auth_server, library):
    client = Caller(auth_server.url, library["deleter"], ASKS)
    params = {"name": "confirm_greeting", "arguments": {}}
    given = {**HARNESS, "user_name": NOT_A_NAME[0], "confirm": YES}
    first = result(client.post("tools/call", {**params, "inputResponses": given}, timeout=60))
    assert first["resultType"] == "input_required" and list(first["inputRequests"]) == ["user_name"], first
    second = result(client.post("tools/call", {**params, "requestState": first["requestState"],
                                               "inputResponses": {"user_name": EVE}}, timeout=60))
    assert list(second["inputRequests"]) == ["confirm"], second  # the "yes" given ahead was not taken
    done = result(client.post("tools/call", {**params, "requestState": second["requestState"],
                                             "inputResponses": {"confirm": {"action": "decline"}}}, timeout=60))
    assert done["content"][0]["text"] == "Not greeted.", done


def wait_for_task(client, task_id, until):
    deadline = time.monotonic() + 60
    while (current := result(client.post("tasks/get", {"taskId": task_id})))["status"] not in until:
        assert time.monotonic() < deadline, current
        time.sleep(0.05)
    return current


def test_a_task_takes_the_answers_its_creating_call_gave_ahead(auth_server, library):
    client = Caller(auth_server.url, library["deleter"], TASKS)
    created = result(client.post("tools/call", {"name": "confirm_greeting", "arguments": {},
                                                "inputResponses": {**HARNESS, "confirm": YES}}))
    waiting = wait_for_task(client, created["taskId"], ("input_required",))
    assert list(waiting["inputRequests"]) == ["confirm"], waiting
    assert waiting["inputRequests"]["confirm"]["params"]["message"] == "Greet Alice?"
    result(client.post("tasks/update", {"taskId": created["taskId"], "inputResponses": {"confirm": YES}}))
    done = wait_for_task(client, created["taskId"], ("completed", "failed", "cancelled"))
    assert done["status"] == "completed" and done["result"]["content"][0]["text"] == "Hello, Alice!", done


def test_in_a_2025_session_a_question_answerable_ahead_is_asked_as_any_other(auth_server, library):
    """The option means nothing where the server asks its client directly: accepted, ignored."""
    client = HttpClient(auth_server.url, token=library["deleter"])
    client.initialize(capabilities=ASKS)
    stream = client.call_tool_stream("test_input_required_result_elicitation", {})
    question = stream.next_message(timeout=30)
    assert question["method"] == "elicitation/create" and question["params"]["message"] == "What is your name?"
    client.request("POST", {"jsonrpc": "2.0", "id": question["id"], "result": HARNESS["user_name"]})
    final = stream.next_message(timeout=30)
    assert final["result"]["content"][0]["text"] == "Hello, Alice!", final
    stream.close()


def test_a_background_call_gives_ahead_at_most_what_a_request_state_may_carry(auth_server, library):
    """A job keeps what a call gave ahead until it ends (its tool may reach the question in any
    run): no more than MAX_REQUEST_STATE_BYTES (256 KiB), the most an inline call carries of a
    client's answers. More is refused before the job is made, and the same answers fit inline,
    where nothing is kept but what its question takes."""
    client = Caller(auth_server.url, library["deleter"], ASKS)
    bulky = {**HARNESS, "padding": {"text": "x" * (300 * 1024)}}
    refused = client.post("tools/call", {"name": "confirm_greeting", "arguments": {}, "inputResponses": bulky},
                          timeout=60)
    error = refused.json.get("error")
    assert error and error["code"] == -32602 and "answer with less" in error["message"], refused.json
    inline = result(client.post("tools/call", {"name": "test_input_required_result_elicitation", "arguments": {},
                                               "inputResponses": bulky}))
    assert inline["content"][0]["text"] == "Hello, Alice!", inline
    # A retry's answers given ahead beside the one asked: the same bound.
    params = {"name": "confirm_greeting", "arguments": {}}
    first = result(client.post("tools/call", {**params, "inputResponses": HARNESS}, timeout=60))
    retry = {**params, "requestState": first["requestState"]}
    refused = client.post("tools/call", {**retry, "inputResponses": {**bulky, "confirm": YES}}, timeout=60)
    assert refused.json.get("error", {}).get("code") == -32602, refused.json
    done = result(client.post("tools/call", {**retry, "inputResponses": {"confirm": YES}}, timeout=60))
    assert done["content"][0]["text"] == "Hello, Alice!", done
