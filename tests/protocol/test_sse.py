"""sse: encoding frames, and the incremental decoder's independence from how bytes are chunked."""
import re

import pytest
from hypothesis import given, settings, strategies as st

from mcp_transport.protocol import sse
from mcp_transport.protocol.sse import SseDecoder, SseEvent


def decode(chunks):
    """Feed chunks to a fresh decoder; return (events, decoder)."""
    decoder = SseDecoder()
    events = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    return events, decoder


def whole(data):
    return [data]


def bytewise(data):
    return [data[i:i + 1] for i in range(len(data))]


def with_empty_chunks(data):
    chunks = []
    for i in range(len(data)):
        chunks += [b"", data[i:i + 1]]
    return chunks + [b""]


def fixed(size):
    def chunker(data):
        return [data[i:i + size] for i in range(0, len(data), size)]
    chunker.__name__ = f"chunks_of_{size}"
    return chunker


def split_inside_crlf(data):
    """Cut between every CR and the LF after it."""
    return re.split(rb"(?<=\r)(?=\n)", data)


def to_crlf(data):
    return data.replace(b"\n", b"\r\n")


def to_cr(data):
    return data.replace(b"\n", b"\r")


def normalise(text):
    return re.sub(r"\r\n|\r|\n", "\n", text)


# A stream exercising most of the decoder, written with LF; the tests convert its line breaks.
STREAM = (
    "\ufeff"                                    # one leading BOM: ignored
    ": a comment line\n"
    ":\n"
    "id: g.0-0\n"
    "retry: 1000\n"
    "data:\n"                                   # the priming event: id + empty data
    "\n"
    "event: message\n"
    "id: g.1-0\n"
    'data: {"jsonrpc":"2.0","method":"x"}\n'
    "\n"
    ": comments are ignored between fields\n"
    "data: first\n"
    "data: second\n"
    "data\n"                                    # no colon: field "data", value ""
    "\n"                                        # no id line: last event id persists
    "retry: 1.5\n"                              # not all ASCII digits: ignored
    "retry: -1\n"
    "id: bad\x00id\n"                           # id with NUL: ignored
    "data: x\n"
    "\n"
    "data:no-space\n"
    "data:  two spaces\n"                       # only one leading space is removed
    "unknown: field\n"
    "\n"
    "event: ping\n"
    "id: g.2-0\n"
    "\n"                                        # no data: nothing dispatched, but id is taken
    "data: after an empty event\n"              # ...and the event type was reset
    "\n"
    "data: 世界 🎉 \ufeff\n"                     # non-ASCII, a BOM mid-stream is data
    "\n"
    "id\n"                                      # empty id: resets the last event id
    "data: no id\n"
    "\n"
    "data: never dispatched\n"                  # trailing incomplete event
).encode("utf-8")

EXPECTED = [
    SseEvent(data="", id="g.0-0", retry=1000),
    SseEvent(data='{"jsonrpc":"2.0","method":"x"}', id="g.1-0", event="message"),
    SseEvent(data="first\nsecond\n", id="g.1-0"),
    SseEvent(data="x", id="g.1-0"),
    SseEvent(data="no-space\n two spaces", id="g.1-0"),
    SseEvent(data="after an empty event", id="g.2-0"),
    SseEvent(data="世界 🎉 \ufeff", id="g.2-0"),
    SseEvent(data="no id", id=None),
]


@pytest.mark.parametrize("line_ending", [lambda b: b, to_crlf, to_cr],
                         ids=["lf", "crlf", "cr"])
@pytest.mark.parametrize("chunker", [whole, bytewise, with_empty_chunks, fixed(2), fixed(3),
                                     fixed(7), split_inside_crlf],
                         ids=lambda c: c.__name__)
def test_decode_is_independent_of_chunking_and_line_endings(line_ending, chunker):
    events, decoder = decode(chunker(line_ending(STREAM)))
    assert events == EXPECTED
    assert decoder.last_event_id == ""


def test_split_inside_crlf_really_splits():
    # Guard for the test above: the CRLF stream is cut inside line breaks.
    chunks = split_inside_crlf(to_crlf(STREAM))
    assert len(chunks) > 10
    assert all(c.endswith(b"\r") for c in chunks[:-1])
    assert all(c.startswith(b"\n") for c in chunks[1:])


@pytest.mark.parametrize("chunks, expected", [
    # Priming event
    ([b"id: g.0-0\ndata:\n\n"], [SseEvent(data="", id="g.0-0")]),
    ([b"id: g.0-0\ndata: \n\n"], [SseEvent(data="", id="g.0-0")]),
    ([b"data\n\n"], [SseEvent(data="")]),
    # Comments only
    ([b": ping\n\n"], []),
    ([b":ping\n\n: again\n\n"], []),
    # Multi-line data
    ([b"data: a\ndata: b\ndata: c\n\n"], [SseEvent(data="a\nb\nc")]),
    ([b"data:\ndata:\n\n"], [SseEvent(data="\n")]),
    # A colon in the value stays
    ([b"data: a: b\n\n"], [SseEvent(data="a: b")]),
    ([b"id: 1:2\ndata: x\n\n"], [SseEvent(data="x", id="1:2")]),
    # retry
    ([b"retry: 3000\ndata: x\n\n"], [SseEvent(data="x", retry=3000)]),
    ([b"retry: 1.5\ndata: x\n\n"], [SseEvent(data="x")]),
    ([b"retry: -1\ndata: x\n\n"], [SseEvent(data="x")]),
    ([b"retry: 1e3\ndata: x\n\n"], [SseEvent(data="x")]),
    ([b"retry:\ndata: x\n\n"], [SseEvent(data="x")]),
    (["retry: \u0661\u0662\ndata: x\n\n".encode()], [SseEvent(data="x")]),  # non-ASCII digits
    # retry applies to its own event only
    ([b"retry: 5\ndata: a\n\ndata: b\n\n"], [SseEvent(data="a", retry=5), SseEvent(data="b")]),
    # id with NUL is ignored, keeping the previous one
    ([b"id: a\ndata: 1\n\nid: b\x00\ndata: 2\n\n"],
     [SseEvent(data="1", id="a"), SseEvent(data="2", id="a")]),
    # Last event id persists across events, and is replaced by a later id
    ([b"id: 7\ndata: 1\n\ndata: 2\n\nid: 8\ndata: 3\n\n"],
     [SseEvent(data="1", id="7"), SseEvent(data="2", id="7"), SseEvent(data="3", id="8")]),
    # The event type does not persist
    ([b"event: a\ndata: 1\n\ndata: 2\n\n"], [SseEvent(data="1", event="a"), SseEvent(data="2")]),
    # Field names are case-sensitive
    ([b"Data: x\n\n"], []),
    ([b"ID: 1\ndata: x\n\n"], [SseEvent(data="x")]),
    # Field name with a leading space is not "data"
    ([b" data: x\n\n"], []),
    # Several blank lines dispatch nothing extra
    ([b"\n\n\ndata: x\n\n\n\n"], [SseEvent(data="x")]),
    # Trailing incomplete event
    ([b"data: x"], []),
    ([b"data: x\n"], []),
    ([b"data: x\n\ndata: y\n"], [SseEvent(data="x")]),
    # Completed later, across chunks
    ([b"data: x\n", b"\n"], [SseEvent(data="x")]),
    ([b"da", b"ta: x\n\n"], [SseEvent(data="x")]),
    # CR at the end of a chunk, LF at the start of the next: one line break, not two
    ([b"data: x\r", b"\ndata: y\r\n\r\n"], [SseEvent(data="x\ny")]),
    ([b"data: x\r", b"", b"\ndata: y\r\n\r\n"], [SseEvent(data="x\ny")]),
    ([b"data: x\r", b"\r\n"], [SseEvent(data="x")]),
    ([b"data: x\r\r", b"\n"], [SseEvent(data="x")]),
    # BOM
    ([b"\xef\xbb\xbfdata: x\n\n"], [SseEvent(data="x")]),
    ([b"\xef", b"\xbb", b"\xbfdata: x\n\n"], [SseEvent(data="x")]),
    ([b"", b"\xef\xbb\xbf", b"data: x\n\n"], [SseEvent(data="x")]),
    # Only one BOM is ignored: the second makes the field name "\ufeffdata"
    ([b"\xef\xbb\xbf\xef\xbb\xbfdata: x\n\n"], []),
    # A BOM later in the stream is not stripped
    ([b"data: a\n\n", b"\xef\xbb\xbfdata: b\n\n"], [SseEvent(data="a")]),
    # Invalid UTF-8 becomes U+FFFD, wherever it is and however it is chunked
    ([b"data: a\xffb\n\n"], [SseEvent(data="a\ufffdb")]),
    ([b"data: a\xff\n\n"], [SseEvent(data="a\ufffd")]),
    ([b"data: a\xff", b"\n\n"], [SseEvent(data="a\ufffd")]),
    ([b"data: \xe4\xb8\n\n"], [SseEvent(data="\ufffd")]),  # truncated 3-byte character
    ([b"data: \xe4", b"\xb8", b"\n\n"], [SseEvent(data="\ufffd")]),
])
def test_decode(chunks, expected):
    assert decode(chunks)[0] == expected


@pytest.mark.parametrize("text", ["世界", "é", "🎉", "a🎉b世c"])
def test_multibyte_split_at_every_position(text):
    raw = f"data: {text}\n\n".encode("utf-8")
    for cut in range(1, len(raw)):
        assert decode([raw[:cut], raw[cut:]])[0] == [SseEvent(data=text)], cut
    assert decode(bytewise(raw))[0] == [SseEvent(data=text)]


def test_last_event_id_is_kept_on_the_decoder():
    decoder = SseDecoder()
    assert decoder.last_event_id == ""
    decoder.feed(b"id: g.5-0\ndata: x\n\n")
    assert decoder.last_event_id == "g.5-0"
    decoder.feed(b"data: y\n\n")
    assert decoder.last_event_id == "g.5-0"
    # An id without data dispatches nothing but still sets the last event id.
    assert decoder.feed(b"id: g.6-0\n\n") == []
    assert decoder.last_event_id == "g.6-0"
    assert decoder.feed(b"data: z\n\n") == [SseEvent(data="z", id="g.6-0")]


def test_feed_returns_only_newly_completed_events():
    decoder = SseDecoder()
    assert decoder.feed(b"data: 1\n\ndata: 2") == [SseEvent(data="1")]
    assert decoder.feed(b"\n") == []
    assert decoder.feed(b"\n") == [SseEvent(data="2")]
    assert decoder.feed(b"") == []


# --- encode -------------------------------------------------------------------------------------

@pytest.mark.parametrize("event, expected", [
    (SseEvent(data="hi"), b"data: hi\n\n"),
    (SseEvent(), b"data: \n\n"),
    (SseEvent(data="", id="g.0-0"), b"id: g.0-0\ndata: \n\n"),
    (SseEvent(data="", id="g.0-0", retry=1000), b"id: g.0-0\nretry: 1000\ndata: \n\n"),
    (SseEvent(data='{"a":1}', id="0123456789abcdef.1-0", event="message"),
     b'id: 0123456789abcdef.1-0\nevent: message\ndata: {"a":1}\n\n'),
    (SseEvent(data="a\nb"), b"data: a\ndata: b\n\n"),
    (SseEvent(data="a\r\nb\rc\nd"), b"data: a\ndata: b\ndata: c\ndata: d\n\n"),
    (SseEvent(data="a\n"), b"data: a\ndata: \n\n"),
    (SseEvent(data="\n"), b"data: \ndata: \n\n"),
    (SseEvent(data=" lead"), b"data:  lead\n\n"),
    (SseEvent(data="世界"), "data: 世界\n\n".encode("utf-8")),
    (SseEvent(data="x", retry=0), b"retry: 0\ndata: x\n\n"),
])
def test_encode(event, expected):
    assert sse.encode(event) == expected


@pytest.mark.parametrize("event", [
    SseEvent(data="", id="g.0-0", retry=1000),
    SseEvent(data="a\nb", id="k", event="message"),
    SseEvent(data="a\n", id=" spaced "),
    SseEvent(data=" lead", event="x"),
    SseEvent(data="世界 🎉"),
    SseEvent(data=""),
])
def test_encode_decode_round_trip(event):
    assert decode([sse.encode(event)])[0] == [event]


@pytest.mark.parametrize("kwargs", [
    {"id": "a\nb"}, {"id": "a\rb"}, {"id": "a\r\nb"}, {"id": "\n"}, {"id": "a\x00b"},
    {"event": "a\nb"}, {"event": "a\rb"}, {"event": "x\x00"},
])
def test_encode_rejects_line_breaks_and_nul_in_fields(kwargs):
    with pytest.raises(ValueError):
        sse.encode(SseEvent(data="x", **kwargs))


@pytest.mark.parametrize("text, expected", [
    ("ping", b": ping\n\n"),
    ("", b": \n\n"),
    ("keep-alive 世界", ": keep-alive 世界\n\n".encode("utf-8")),
])
def test_comment(text, expected):
    assert sse.comment(text) == expected
    assert decode([expected])[0] == []


@pytest.mark.parametrize("text", ["a\nb", "a\rb", "\r\n", "a\x00"])
def test_comment_rejects_line_breaks_and_nul(text):
    with pytest.raises(ValueError):
        sse.comment(text)


def test_comment_between_events_does_not_disturb_them():
    stream = sse.encode(SseEvent(data="a", id="1")) + sse.comment("ping") + sse.encode(SseEvent(data="b"))
    assert decode(bytewise(stream))[0] == [SseEvent(data="a", id="1"), SseEvent(data="b", id="1")]


# --- properties ---------------------------------------------------------------------------------

FIELD_TEXT = st.text(min_size=1, max_size=20).filter(
    lambda s: not any(c in s for c in "\r\n\x00"))


@settings(max_examples=300, deadline=None)
@given(data=st.text(), event_id=FIELD_TEXT,
       retry=st.none() | st.integers(min_value=0, max_value=10**9))
def test_round_trip_any_text(data, event_id, retry):
    event = SseEvent(data=data, id=event_id, event="message", retry=retry)
    frame = sse.encode(event)
    assert frame.endswith(b"\n\n")
    expected = SseEvent(data=normalise(data), id=event_id, event="message", retry=retry)
    assert decode([frame])[0] == [expected]
    assert decode(bytewise(frame))[0] == [expected]


@settings(max_examples=200, deadline=None)
@given(texts=st.lists(st.text(max_size=30), min_size=1, max_size=5),
       cuts=st.lists(st.integers(min_value=0, max_value=400), max_size=10))
def test_round_trip_several_events_randomly_chunked(texts, cuts):
    events = [SseEvent(data=t, id=f"g.{i}-0") for i, t in enumerate(texts)]
    stream = b"".join(sse.encode(e) for e in events)
    bounds = sorted({0, len(stream), *(min(c, len(stream)) for c in cuts)})
    chunks = [stream[a:b] for a, b in zip(bounds, bounds[1:])]
    expected = [SseEvent(data=normalise(e.data), id=e.id) for e in events]
    assert decode(chunks)[0] == expected


# Streams built from SSE-ish tokens, including invalid UTF-8, BOMs, NULs and all line breaks.
TOKENS = st.sampled_from([
    b"data", b"id", b"event", b"retry", b":", b" ", b"\r", b"\n", b"\r\n", b"x", b"1", b"-",
    b"\x00", b"\xef\xbb\xbf", "世".encode(), "🎉".encode(), b"\xff", b"\xe4\xb8", b"\xc3",
])


@settings(max_examples=300, deadline=None)
@given(stream=st.lists(TOKENS, max_size=60).map(b"".join),
       cuts=st.lists(st.integers(min_value=0, max_value=300), max_size=8))
def test_decoding_does_not_depend_on_chunking(stream, cuts):
    reference, ref_decoder = decode([stream])
    bounds = sorted({0, len(stream), *(min(c, len(stream)) for c in cuts)})
    for chunks in (bytewise(stream), [stream[a:b] for a, b in zip(bounds, bounds[1:])],
                   with_empty_chunks(stream)):
        events, decoder = decode(chunks)
        assert events == reference
        assert decoder.last_event_id == ref_decoder.last_event_id
    for event in reference:
        assert isinstance(event, SseEvent) and isinstance(event.data, str)
        assert event.id is None or ("\x00" not in event.id and event.id)
