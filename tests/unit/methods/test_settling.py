"""methods/settling.py: a coroutine runs until it ends or waits on nothing but its questions."""
import asyncio

import pytest

from mcp_transport.methods.settling import SETTLE_TURNS, run_until_settled


class Ended(Exception):
    def __init__(self, asked):
        super().__init__(asked)
        self.asked = asked


class Asker:
    """What a round or a job channel does with a question: note it, say so, park the branch."""

    def __init__(self):
        self.changed, self.asked, self.cancelled = asyncio.Event(), [], []

    async def ask(self, question):
        self.asked.append(question)
        self.changed.set()
        try:
            await asyncio.get_running_loop().create_future()
        except asyncio.CancelledError:
            self.cancelled.append(question)
            raise

    def ending(self):
        return Ended(list(self.asked))


async def turns(count):
    for _ in range(count):
        await asyncio.sleep(0)


def test_the_value_of_a_coroutine_that_ends():
    async def main():
        asker = Asker()

        async def handler():
            await turns(SETTLE_TURNS * 2)
            return 42
        return await run_until_settled(handler(), asker.changed, asker.ending)

    assert asyncio.run(main()) == 42


def test_an_exception_of_the_coroutine_comes_through():
    async def handler():
        raise ValueError("no")

    with pytest.raises(ValueError, match="no"):
        asyncio.run(run_until_settled(handler(), asyncio.Event(), Ended))


def test_a_settled_coroutine_ends_with_its_questions_and_its_task_cancelled():
    async def main():
        asker = Asker()

        async def handler():
            await asyncio.gather(asker.ask("a"), asker.ask("b"))
        with pytest.raises(Ended) as ended:
            await run_until_settled(handler(), asker.changed, asker.ending)
        return asker, ended.value, asyncio.all_tasks() - {asyncio.current_task()}

    asker, ended, left = asyncio.run(main())
    assert ended.asked == ["a", "b"]
    assert sorted(asker.cancelled) == ["a", "b"]
    assert left == set()


def test_a_question_asked_during_the_settle_turns_restarts_the_wait():
    """Each question comes SETTLE_TURNS - 1 turns after the one before: the wait restarts each
    time, so the run ends with all of them rather than SETTLE_TURNS turns after the first."""
    async def main():
        asker = Asker()

        async def late(question, after):
            await turns(after)
            await asker.ask(question)

        async def handler():
            await asyncio.gather(*(late(n, n * (SETTLE_TURNS - 1)) for n in range(6)))
        with pytest.raises(Ended) as ended:
            await run_until_settled(handler(), asker.changed, asker.ending)
        return ended.value

    assert asyncio.run(main()).asked == list(range(6))


def test_no_end_while_settled_is_false():
    """What a job does while a question is still being sent: the run waits for the next one."""
    async def main():
        asker, sending = Asker(), [False]

        async def handler():
            ask = asyncio.ensure_future(asker.ask("first"))
            sending[0] = True
            await turns(SETTLE_TURNS * 4)
            sending[0] = False
            await asyncio.gather(ask, asker.ask("second"))
        with pytest.raises(Ended) as ended:
            await run_until_settled(handler(), asker.changed, asker.ending, settled=lambda: not sending[0])
        return ended.value

    assert asyncio.run(main()).asked == ["first", "second"]
