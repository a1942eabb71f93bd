"""``per_process`` (methods/clients.py): one client per event loop, made at its first use; one per
thread where no loop runs; a closed loop's client dropped; and an async tool that uses one runs
on the event loop itself (no worker thread), through the real endpoint."""
import asyncio
import json
import threading

from channels.testing import ApplicationCommunicator

from mcp_transport import per_process
from mcp_transport.methods import threads


def _counting():
    made = []

    @per_process
    def client():
        made.append(object())
        return made[-1]
    return client, made


def test_one_client_per_loop_made_at_first_use():
    client, made = _counting()
    assert made == []

    async def twice():
        return client(), client(), await asyncio.gather(*(asyncio.to_thread(lambda: 0) for _ in range(2)))

    first, second, _ = asyncio.run(twice())
    assert first is second and made == [first]
    assert client.made() == []  # its loop has closed
    third, fourth, _ = asyncio.run(twice())  # a new loop (a Celery call's): its own client
    assert third is fourth and third is not first and made == [first, third]


def test_a_closed_loops_client_is_dropped_when_another_loop_asks():
    client, made = _counting()

    async def use():
        return client()
    asyncio.run(use())
    asyncio.run(use())
    assert len(made) == 2 and len(client._by_loop) == 1  # the first loop's entry went


def test_sync_code_gets_one_client_per_thread():
    client, made = _counting()
    assert client() is client()
    other = []
    worker = threading.Thread(target=lambda: other.append(client()))
    worker.start()
    worker.join()
    assert other[0] is not client() and len(made) == 2


def test_forget_makes_the_next_call_make_a_new_one():
    client, made = _counting()
    first = client()
    client.forget()
    assert client() is not first and len(made) == 2


def test_the_decorated_function_keeps_its_name_and_doc():
    @per_process
    def weather_api():
        """The weather API's client."""
    assert weather_api.__name__ == "weather_api" and weather_api.__doc__ == "The weather API's client."


def _scope():
    return {"type": "http", "method": "POST", "path": "/mcp", "client": ("127.0.0.1", 5000),
            "headers": [(b"host", b"localhost"), (b"content-type", b"application/json"),
                        (b"accept", b"application/json, text/event-stream"),
                        (b"mcp-protocol-version", b"2026-07-28"), (b"mcp-method", b"tools/call"),
                        (b"mcp-name", b"loop_thread")]}


def test_an_async_tool_runs_on_the_event_loop_without_a_thread_hop(monkeypatch):
    from mcp_transport.methods.registry import make_tool, registry
    from mcp_transport.transports.streamable_http import McpHttpConsumer

    seen, hops = [], []
    original = threads.run
    monkeypatch.setattr(threads, "run", lambda *a, **k: hops.append(a) or original(*a, **k))

    @per_process
    def shared():
        return object()

    async def loop_thread() -> str:
        seen.append((threading.get_ident(), shared()))
        return "ok"
    monkeypatch.setitem(registry.tools, "loop_thread", make_tool(loop_thread))

    async def two_calls():
        for n in range(2):
            meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
                    "io.modelcontextprotocol/clientInfo": {"name": "loop", "version": "0"}}
            body = {"jsonrpc": "2.0", "id": n, "method": "tools/call",
                    "params": {"name": "loop_thread", "arguments": {}, "_meta": meta}}
            communicator = ApplicationCommunicator(McpHttpConsumer.as_asgi(), _scope())
            await communicator.send_input({"type": "http.request", "body": json.dumps(body).encode()})
            start, reply = await communicator.receive_output(30), await communicator.receive_output(30)
            await communicator.wait(30)
            assert start["status"] == 200 and json.loads(reply["body"])["result"]["structuredContent"] == {"result": "ok"}
        return threading.get_ident()

    loop_thread_id = asyncio.run(two_calls())
    assert [ident for ident, _ in seen] == [loop_thread_id, loop_thread_id] and hops == []
    assert seen[0][1] is seen[1][1]  # one client for both calls
