"""The MCP endpoint's consumers join no channel layer (transports/endpoint.py): a project whose
CHANNEL_LAYERS serves its own consumers (channels_redis, say) costs an MCP request no channel and
no channel-layer receive, and its messages are still handled in order."""
import asyncio
import json

import pytest
from channels.layers import InMemoryChannelLayer
from channels.testing import ApplicationCommunicator
from django.test import override_settings

from mcp_transport.transports.streamable_http import McpHttpConsumer

LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}
SCOPE = {"type": "http", "method": "POST", "path": "/mcp", "client": ("127.0.0.1", 5000),
         "headers": [(b"host", b"localhost"), (b"content-type", b"application/json"),
                     (b"accept", b"application/json, text/event-stream")]}


@pytest.fixture
def channels_made(monkeypatch):
    made, new_channel = [], InMemoryChannelLayer.new_channel

    async def counting(self, prefix="specific."):
        made.append(prefix)
        return await new_channel(self, prefix)
    monkeypatch.setattr(InMemoryChannelLayer, "new_channel", counting)
    return made


async def post(body: bytes):
    communicator = ApplicationCommunicator(McpHttpConsumer.as_asgi(), SCOPE)
    await communicator.send_input({"type": "http.request", "body": body[:5], "more_body": True})
    await communicator.send_input({"type": "http.request", "body": body[5:]})  # in order, in two parts
    start = await communicator.receive_output(30)
    reply = await communicator.receive_output(30)
    await communicator.wait(30)
    return start["status"], json.loads(reply["body"])


def test_a_request_joins_no_channel_layer_of_the_project(channels_made):
    with override_settings(CHANNEL_LAYERS=LAYERS, MCP_TRANSPORT={}):
        status, reply = asyncio.run(post(b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'))
    assert status == 400 and "Mcp-Session-Id" in reply["error"]["message"], reply  # it was served
    assert channels_made == []
