"""Multi-round-trip requests served inline (in the web process), over protocol/mrtr.py.

``Context.elicit``, ``sample`` and ``list_roots`` keep their signatures in both eras. In the
modern era they cannot send a request to the client, so the handler is *replayed*: on each
round it runs from the start; a question whose answer the round knows (from the sealed
``requestState`` or the retry's ``inputResponses``) returns it at once, and the first one it
does not know ends the round with an ``InputRequiredResult``. A handler should therefore ask
before it does anything it must not do twice.

Answers only to questions asked: the sealed state records the questions of its round (key and
digest, protocol/mrtr.py), and a retry's ``inputResponses`` count only for those, each for the
same question asked again. An answer the server never asked for (every answer of a request
without a state, a key that round did not ask) is ignored and the handler asks again: a made-up
``{"confirm": ...}`` on a first request cannot stand in for the user's confirmation. The one
exception is the tool's to make, question by question: ``answerable_ahead=True`` (with a key it
chose) lets the question take a valid answer the request gives under that key before it was asked.

An async handler that asks several questions at once (``asyncio.gather``) asks them all in one
round: an unanswered question parks its branch, and the round ends once no branch asks anything
new. A sync handler (in a worker thread) ends the round at its first unanswered question.

Background (Celery) tools replay in the worker instead: their job parks until the retry hands
it the answers (running/jobs/following.py, eras/modern_2026/jobs.py).
"""
import asyncio

from . import request_state
from ...methods import answers
from ...methods.context import TaskStarted
from ...methods.settling import run_until_settled
from ...protocol import mrtr

class LiveRound:
    """The round a handler runs in; what its channel's ``request`` consults."""

    def __init__(self, round_: mrtr.Round):
        self.round = round_
        self.changed = asyncio.Event()

    async def request(self, method: str, params: dict, key=None, park=True, answerable_ahead=False) -> dict:
        key = self.round.key_for(method, key)
        answer = self.round.answer(key, method, params)
        if answer is None and answerable_ahead:
            answer = self.round.answer_ahead(key, method, params, answers.fits)
        if answer is not None:
            return answer
        self.round.ask(key, method, params)
        self.changed.set()
        if not park:
            raise mrtr.InputRequired(dict(self.round.asked))
        await asyncio.get_running_loop().create_future()  # until the round ends (cancelled)


async def run(coroutine, live: LiveRound):
    """Run ``coroutine`` in ``live``; its value, or ``mrtr.InputRequired`` with every question
    it asked once it waits on nothing else (methods/settling.py)."""
    return await run_until_settled(coroutine, live.changed,
                                   ending=lambda: mrtr.InputRequired(dict(live.round.asked)))


def continues_a_round(params: dict) -> bool:
    """The request answers an earlier round: it carries that round's state or its answers (which
    ``serve`` checks, so a malformed one is refused even by a method that cannot ask)."""
    return params.get("requestState") is not None or params.get("inputResponses") is not None


async def serve(handler, method: str, params: dict, call) -> dict:
    """Run a carrier method's handler (tools/call, prompts/get, resources/read) for one round:
    its result, or the ``InputRequiredResult`` that asks what it needs."""
    payload = request_state.payload_of(params, method, call)
    live = LiveRound(mrtr.Round.resume(payload, mrtr.input_responses(params)))
    call.channel.round = live
    try:
        return await run(handler(params, call), live)
    except mrtr.InputRequired as exc:
        state = request_state.seal(method, params, call, live.round.carried())
        return mrtr.input_required_result(exc.requests, state)
    except TaskStarted as started:  # the handler escalated to a task (Context.run_as_task)
        return started.result
    finally:
        call.channel.round = None
