"""versions: negotiation, priming, modern (stateless-era) requests."""
import pytest

from mcp_transport.protocol import versions


def test_constants():
    assert versions.LATEST == "2025-11-25"
    assert versions.LATEST in versions.SUPPORTED
    assert versions.SUPPORTED == tuple(sorted(versions.SUPPORTED, reverse=True))
    assert not set(versions.MODERN) & set(versions.SUPPORTED)


@pytest.mark.parametrize("requested, expected", [
    ("2025-11-25", "2025-11-25"),
    ("2025-06-18", "2025-06-18"),
    ("2025-03-26", "2025-03-26"),
    # Unsupported: answer with the latest we speak.
    ("2024-11-05", "2025-11-25"),
    ("2026-07-28", "2025-11-25"),
    ("1999-01-01", "2025-11-25"),
    ("banana", "2025-11-25"),
    ("", "2025-11-25"),
    (" 2025-06-18", "2025-11-25"),
    (None, "2025-11-25"),
    (20250618, "2025-11-25"),
    (["2025-06-18"], "2025-11-25"),
    ({"v": "2025-06-18"}, "2025-11-25"),
])
def test_negotiate(requested, expected):
    assert versions.negotiate(requested) == expected


@pytest.mark.parametrize("version, primes", [
    ("2025-11-25", True),
    ("2025-06-18", False),
    ("2025-03-26", False),
    ("2026-07-28", True),
])
def test_primes_streams(version, primes):
    assert versions.primes_streams(version) is primes


@pytest.mark.parametrize("version", versions.SUPPORTED)
def test_primes_streams_covers_every_supported_version(version):
    assert versions.primes_streams(version) is (version >= "2025-11-25")


@pytest.mark.parametrize("params, modern", [
    ({}, False),
    ({"name": "x"}, False),
    ({"_meta": {}}, False),
    ({"_meta": None}, False),
    ({"_meta": {"progressToken": 1}}, False),
    ({"_meta": "io.modelcontextprotocol/protocolVersion"}, False),
    ({"_meta": ["io.modelcontextprotocol/protocolVersion"]}, False),
    ({"io.modelcontextprotocol/protocolVersion": "2026-07-28"}, False),
    ({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}, True),
    ({"_meta": {"io.modelcontextprotocol/protocolVersion": None}}, True),
    ({"_meta": {"progressToken": 1, versions.MODERN_META_VERSION: "x"}}, True),
])
def test_is_modern_request(params, modern):
    assert versions.is_modern_request(params) is modern
