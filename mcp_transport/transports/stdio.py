"""stdio: one MCP session on the process's stdin and stdout (``manage.py mcp_stdio``).

"The server reads JSON-RPC messages from its standard input (stdin) and sends messages to its
standard output (stdout). Messages are individual JSON-RPC requests, notifications, or
responses. Messages are delimited by newlines, and MUST NOT contain embedded newlines. ... The
server MUST NOT write anything to its stdout that is not a valid MCP message."
-- spec 2025-11-25 basic/transports (stdio)

The session is an ordinary one: a row the admin lists, its events in the event store, requests
run by ``dispatch`` and background tools by the project's Celery workers (``session.py``). The
process ends when stdin closes ("the client SHOULD initiate shutdown by first closing the input
stream to the child process") or when the session is terminated, and closes the session.
"""
import asyncio
import logging
import signal
import sys
import threading

from django.contrib.auth.models import AnonymousUser

from .. import auth, logs
from ..state import control, sessions
from ..conf import get_config, message_bounds
from ..protocol import jsonrpc
from ..protocol.errors import ErrorCode, ProtocolError
from ..storage import get_event_store
from . import message_session

logger = logging.getLogger(__name__)


async def serve(reader: asyncio.StreamReader, write, user=None) -> None:
    """Serve one session: lines from ``reader``, each message out through ``write(bytes)``."""
    await control.ensure_listening()
    # The local user who started the process: no token, no address quota.
    principal = auth.Principal.for_user(user) if user is not None else auth.Principal(user=AnonymousUser())
    session, cursor = await message_session.open_session(principal)
    logs.bind_session(session.id)
    logger.info("stdio session %s started", session.id)

    def deliver(message, _event_id):
        write(jsonrpc.dumps(message) + b"\n")

    follower = message_session.Follower(cursor, deliver)
    await follower.start()
    following = asyncio.create_task(follower.run())
    reading = asyncio.create_task(_read_messages(reader, session, principal, write))
    try:
        done, _ = await asyncio.wait([following, reading], return_when=asyncio.FIRST_COMPLETED)
        for task in done:
            task.result()  # raises what ended it, if anything did
        if reading in done:  # stdin closed: answer what was asked, then end
            await follower.drain()
            await following
    finally:
        for task in (following, reading):
            task.cancel()
        await sessions.close(session.id, "deleted", by=(session.principal, ""))
        await get_event_store().flush()
        logger.info("stdio session %s ended", session.id)


async def _read_messages(reader, session, principal, write):
    async for line in read_lines(reader):
        if line is None:
            write(_error(ErrorCode.INVALID_REQUEST, "The message is longer than MAX_REQUEST_BYTES."))
        elif line.strip():
            await _receive_line(session, line, principal, write)


async def _receive_line(session, line, principal, write):
    try:
        message = jsonrpc.parse(line, message_bounds())
    except ProtocolError as exc:
        return write(_error(exc.code, exc.message))
    try:
        await message_session.receive(session, message, principal)
    except Exception:
        logger.exception("the stdio transport failed on a %s", type(message).__name__)
        if isinstance(message, jsonrpc.Request):
            write(_error(ErrorCode.INTERNAL_ERROR, "Internal error.", message.id))


def _error(code, text, request_id=None) -> bytes:
    return jsonrpc.dumps(jsonrpc.error_message(request_id, code, text)) + b"\n"


async def read_lines(reader: asyncio.StreamReader):
    """Lines without their newline, until EOF; None for a line over the reader's limit (it is
    skipped whole, so the next line is read as a message of its own)."""
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:
            if exc.partial:
                yield exc.partial
            return
        except asyncio.LimitOverrunError:
            if not await _skip_line(reader):
                return
            yield None
            continue
        yield line[:-1]


async def _skip_line(reader) -> bool:
    """Drop input up to the next newline; False at EOF."""
    while True:
        try:
            await reader.readuntil(b"\n")
            return True
        except asyncio.LimitOverrunError as exc:
            await reader.readexactly(exc.consumed)
        except asyncio.IncompleteReadError:
            return False


async def stdin_reader() -> asyncio.StreamReader:
    """stdin as a StreamReader whose limit is MAX_REQUEST_BYTES (a pipe, or a file read by a thread)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=get_config()["MAX_REQUEST_BYTES"])
    try:
        await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin.buffer)
    except ValueError:  # a regular file: asyncio cannot poll it
        def pump():
            for chunk in iter(lambda: sys.stdin.buffer.read1(65536), b""):
                loop.call_soon_threadsafe(reader.feed_data, chunk)
            loop.call_soon_threadsafe(reader.feed_eof)
        threading.Thread(target=pump, name="mcp-stdin", daemon=True).start()
    return reader


async def main(out, user=None) -> None:
    """What ``manage.py mcp_stdio`` runs: serve stdin, writing messages to ``out``. SIGTERM
    (how clients stop a server that does not exit) closes the session too."""
    def write(data: bytes):
        out.write(data)
        out.flush()

    serving = asyncio.create_task(serve(await stdin_reader(), write, user))
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, serving.cancel)
    try:
        await serving
    except asyncio.CancelledError:
        if not serving.cancelled():
            raise
