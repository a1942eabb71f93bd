"""What the example tools share: the reference servers' logger name, their compact JSON, and
sample media built at import time.
"""
import io
import json
import math
import struct
import wave
import zlib


# The logger name the reference servers put on their notifications/message.
LOGGER = "conformance-test-server"


def _json(value) -> str:
    """Compact JSON, as JavaScript's ``JSON.stringify`` writes it in the reference texts."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


# --- Sample media, built at import time with the stdlib -----------------------------------------

def _png_pixel(rgba=(255, 0, 0, 255)) -> bytes:
    """A 1x1 RGBA PNG, red by default (the reference servers' ``PNG_1x1`` is the same red pixel)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 1, 1, 8, 6, 0, 0, 0)  # width, height, 8 bits, RGBA, defaults
    pixels = zlib.compress(b"\x00" + bytes(rgba), 9)        # one scanline: filter 0, then the pixel
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def _wav_tone(hz: int = 440, seconds: float = 0.1, rate: int = 8000) -> bytes:
    """A short 16-bit mono PCM sine tone as a complete WAV file.

    The references' ``WAV_MIN`` declares 2 bytes of samples but ends before them; this one is whole.
    """
    samples = (round(8000 * math.sin(2 * math.pi * hz * n / rate)) for n in range(int(rate * seconds)))
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes(b"".join(struct.pack("<h", s) for s in samples))
    return buffer.getvalue()


PNG_1X1 = _png_pixel()
WAV_TONE = _wav_tone()
