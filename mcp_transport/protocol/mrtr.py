"""Multi-round-trip requests (SEP-2322, spec 2026-07-28 basic/patterns/mrtr), without I/O.

In the modern era a server cannot send a request to the client. A method that needs input
instead ends the round with an ``InputRequiredResult``::

    {"resultType": "input_required",
     "inputRequests": {"<key>": {"method": "elicitation/create", "params": {...}}, ...},
     "requestState": "<opaque>"}

and the client retries the same request with a new id, ``inputResponses`` (the same keys) and
the ``requestState`` it was given. This module holds what does not need I/O: the round's known
answers and new questions (``Round``), the claims a ``requestState`` carries and their check
(which methods may ask is a fact each method declares: ``MethodSpec.round_trip``). Sealing the claims (HMAC keyed from Django's secret) is the caller's:
``request_state.py``.

"servers MUST treat requestState as an attacker-controlled input ... MUST reject state that
fails verification" and SHOULD bind the principal, a TTL and the request (MR26): the claims bind
the method, its target (tool or prompt name, resource URI), a digest of its arguments, and the
principal; the seal adds the expiry.

An answer counts only for a question this server asked: the state names the questions of its
round (each key with a digest of its method and params), and of a retry's ``inputResponses`` only
the answers to those are taken, each for the same question asked again under its key
(``Round.resume``, ``Round.answer``). Anything else -- a key the round did not ask, every answer
of a request without a state -- is ignored ("the server SHOULD ignore any information it does
not recognize or need"), so the handler asks its question again ("SHOULD respond with a new
InputRequiredResult requesting the missing information again, rather than returning an error").

Answers given ahead: a question the tool declares ``answerable_ahead`` (it has a key the tool
chose) also takes an answer the client gave before it was asked -- in the request whose round
reaches it, under its key, for a key that round's state did not ask (every key of a request
without a state) -- if it is a valid answer to that question (``Round.answer_ahead``; the caller
says what is valid). Once taken it is carried, bound to its question, as an answer asked for.
"""
import hashlib
import json
from typing import Optional

from .errors import InvalidParams

#: Short key prefixes for requests the tool did not name.
_KEY_PREFIX = {"elicitation/create": "elicit", "sampling/createMessage": "sample", "roots/list": "roots"}

CLAIMS_VERSION = 1


class InputRequired(BaseException):
    """Ends the round: the request cannot go on without the client's answers to ``requests``.

    A BaseException, as ``asyncio.CancelledError`` is: a tool's ``except Exception`` must not
    swallow the end of a round (the tool runs again, from the start, on the retry)."""

    def __init__(self, requests: dict):
        super().__init__(f"input required: {', '.join(requests)}")
        self.requests = requests


class BadRequestState(InvalidParams):
    """A requestState that fails verification: -32602 with ``data.reason``."""

    def __init__(self, message, reason):
        super().__init__(message, data={"reason": reason})
        self.reason = reason


def tampered() -> BadRequestState:
    return BadRequestState("The requestState failed verification: it was altered or not issued by this server.",
                           "invalid")


def expired() -> BadRequestState:
    return BadRequestState("The requestState has expired: send the request again without it.", "expired")


def oversized(limit: int) -> BadRequestState:
    return BadRequestState(f"The requestState is longer than the {limit} bytes this server ever issues.", "invalid")


def too_much_to_carry(size: int, limit: int) -> InvalidParams:
    """The answers a round would carry to the next make a state over ``limit``: refused, so a
    state (and every retry that presents it) stays within the bound."""
    return InvalidParams(f"The answers this request carries to its next round take {size} bytes sealed; this "
                         f"server carries at most {limit}: answer with less.")


def too_much_ahead(size: int, limit: int) -> InvalidParams:
    """The answers a request gives ahead to a background call (which its job keeps until the
    tool reaches their questions) take more than ``limit``: refused before anything is kept."""
    return InvalidParams(f"The answers this request gives ahead take {size} bytes; this server keeps at most "
                         f"{limit} of them for a background call: answer with less.")


def foreign() -> BadRequestState:
    return BadRequestState("The requestState was issued for another request or principal.", "foreign")


# -- the request a state belongs to ---------------------------------------------------------

def target(method: str, params: dict) -> str:
    """What the request acts on: a tool or prompt name, a resource URI."""
    value = params.get("uri") if method == "resources/read" else params.get("name")
    return value if isinstance(value, str) else ""


def arguments_digest(params: dict) -> str:
    """A digest of the request's arguments, so state minted for one call is refused by another
    call of the same tool with other arguments."""
    arguments = params.get("arguments")
    canonical = json.dumps(arguments if isinstance(arguments, dict) else {}, sort_keys=True, separators=(",", ":"),
                           ensure_ascii=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:32]


def make_claims(method: str, params: dict, principal: Optional[str], payload: dict) -> dict:
    """What a requestState carries, before it is sealed (the seal adds the time it was made)."""
    return {"v": CLAIMS_VERSION, "m": method, "t": target(method, params), "a": arguments_digest(params),
            "p": principal, "s": payload}


def check_claims(claims, method: str, params: dict, principal: Optional[str]) -> dict:
    """The payload of verified ``claims`` if they belong to this request and principal; raises
    ``BadRequestState`` otherwise."""
    if not isinstance(claims, dict) or claims.get("v") != CLAIMS_VERSION or not isinstance(claims.get("s"), dict):
        raise tampered()
    if (claims.get("m"), claims.get("t"), claims.get("a")) != (method, target(method, params),
                                                                arguments_digest(params)):
        raise foreign()
    if claims.get("p") != principal:
        raise foreign()
    return claims["s"]


# -- the client's answers -----------------------------------------------------------------------

def input_responses(params: dict) -> dict:
    """``params.inputResponses``: an object of results (``{}`` when absent). Anything else is
    -32602: "The server SHOULD validate them and return a JSON-RPC error"."""
    responses = params.get("inputResponses")
    if responses is None:
        return {}
    if not isinstance(responses, dict) or not all(isinstance(value, dict) for value in responses.values()):
        raise InvalidParams("inputResponses must be an object whose values are the results of the input requests.")
    return responses


def request_state(params: dict) -> Optional[str]:
    """``params.requestState`` (an explicit null counts as absent)."""
    state = params.get("requestState")
    if state is not None and not isinstance(state, str):
        raise tampered()
    return state


def key_prefix(method: str) -> str:
    return _KEY_PREFIX.get(method, "input")


def question_digest(method: str, params) -> str:
    """What a question asks (its method and params), so an answer given to it is not taken for
    another question under the same key."""
    canonical = json.dumps({"method": method, "params": params}, sort_keys=True, separators=(",", ":"),
                           ensure_ascii=True, default=str)
    return hashlib.sha256(canonical.encode()).hexdigest()[:24]


def question_digests(requests: dict) -> dict:
    """``inputRequests`` (key -> ``{method, params}``) as key -> digest: what a state records."""
    return {key: question_digest(request.get("method"), request.get("params")) for key, request in requests.items()}


def asked_answers(responses: dict, asked) -> dict:
    """The answers of ``responses`` to questions ``asked`` (key -> digest, from a verified state)
    names; none when there is no such record."""
    asked = asked if isinstance(asked, dict) else {}
    return {key: value for key, value in responses.items() if key in asked}


class Round:
    """One round of a request: the answers it may use and the questions it asks now.

    Questions get keys in the order the handler asks them (``elicit-1``, ``sample-2``...), unless
    it names them: a handler that runs again from the start on the retry asks the same questions
    in the same order, so the key of each finds its answer. ``questions`` (key -> digest) holds
    what was asked under each key whose answer the round knows: an answer is given back only to
    the same question. ``ahead`` holds the answers to keys nobody asked (``answer_ahead``)."""

    def __init__(self, answers: Optional[dict] = None, questions: Optional[dict] = None,
                 ahead: Optional[dict] = None):
        self.answers = dict(answers or {})
        self.questions = dict(questions or {})
        self.ahead = dict(ahead or {})
        self.asked = {}
        self._used = set()
        self._count = 0

    @classmethod
    def resume(cls, payload: dict, responses: dict) -> "Round":
        """The round of a request whose verified state is ``payload`` (``{}``: none) and whose
        ``inputResponses`` are ``responses``: the answers the state carries, and the answers to
        the questions it says were asked and are still open; the answers to keys it did not ask
        are answers given ahead, which only a question that takes them may use."""
        questions = payload.get("questions") if isinstance(payload.get("questions"), dict) else {}
        carried = payload.get("answers") if isinstance(payload.get("answers"), dict) else {}
        answers = {key: value for key, value in carried.items() if key in questions}
        answers.update({key: value for key, value in asked_answers(responses, questions).items()
                        if key not in answers})
        return cls(answers, questions, {key: value for key, value in responses.items() if key not in questions})

    def key_for(self, method: str, key: Optional[str] = None) -> str:
        self._count += 1
        return key if key else f"{key_prefix(method)}-{self._count}"

    def answer(self, key: str, method: str, params):
        """The client's answer for the question ``method``/``params`` asked under ``key``, or
        None: none known, or it answered something else."""
        found = self.answers.get(key)
        if found is None or self.questions.get(key) != question_digest(method, params):
            return None
        self._used.add(key)
        return found

    def answer_ahead(self, key: str, method: str, params, fits) -> Optional[dict]:
        """The answer given ahead under ``key`` if ``fits(method, params, answer)`` says it is a
        valid answer to this question, or None. Taken, it is the question's answer from now on:
        carried to later rounds bound to this question, as an answer asked for."""
        found = self.ahead.pop(key, None)
        if found is None or not fits(method, params, found):
            return None
        self.answers[key], self.questions[key] = found, question_digest(method, params)
        self._used.add(key)
        return found

    def ask(self, key: str, method: str, params: dict) -> None:
        self.asked[key] = {"method": method, "params": params}

    def carried(self) -> dict:
        """What the next round's state carries: the answers this round used (keys the handler
        never asked for are dropped) and the digest of every question it knows an answer to or
        asks now."""
        used = sorted(self._used - set(self.asked))
        questions = {key: self.questions[key] for key in used}
        questions.update(question_digests(self.asked))
        return {"answers": {key: self.answers[key] for key in used}, "questions": questions}


def input_required_result(requests: dict, state: Optional[str]) -> dict:
    """"at least one of the two fields MUST be present"."""
    result = {"resultType": "input_required", "inputRequests": requests}
    if state is not None:
        result["requestState"] = state
    return result
