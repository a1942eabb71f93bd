"""The fuzz suite's live parts and its two sizes.

``MCP_FUZZ_PROFILE=ci`` (the default, what ``make test`` runs) sends about a thousand cases, in
well under two minutes on a quiet machine; ``MCP_FUZZ_PROFILE=bench`` sends more than 100,000
(``MCP_FUZZ_SCALE`` multiplies either). ``MCP_FUZZ_REPORT=<file>`` writes the figures as JSON.
"""
import os

import pytest
from hypothesis import HealthCheck, settings

PROFILE = os.environ.get("MCP_FUZZ_PROFILE", "ci")
if PROFILE not in ("ci", "bench"):
    raise pytest.UsageError(f"MCP_FUZZ_PROFILE must be ci or bench, not {PROFILE!r}")
SCALE = float(os.environ.get("MCP_FUZZ_SCALE", "1"))

# No example database: nothing is written under the project (and a found failure is printed
# with its seed); the cases are made fresh on every run.
settings.register_profile("mcp-fuzz", deadline=None, database=None, print_blob=True,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                                                 HealthCheck.data_too_large, HealthCheck.filter_too_much])


def examples(ci: int, bench: int) -> int:
    """Examples of one property in the chosen profile (the bench ones add up to over 100,000)."""
    return max(1, int((bench if PROFILE == "bench" else ci) * SCALE))


@pytest.fixture(scope="module")
def fuzz_server(start_server):
    """A daphne process of its own, so its log holds only what the fuzz sent."""
    return start_server()
