"""A method's name decides once: "tools/call" is written where the method is declared
(methods/tool_calls.py) and where a request's route is made (running/routes.py). Every other
layer reads what the method declares (its target's kind) or the route; the protocol core and
the test clients, which speak the wire, are left out."""
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "mcp_transport"
SPEAKS_THE_WIRE = ("protocol", "testing")


def test_tools_call_is_named_where_it_is_declared_and_routed_only():
    naming = sorted(str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")
                    if path.relative_to(PACKAGE).parts[0] not in SPEAKS_THE_WIRE
                    and '"tools/call"' in path.read_text())
    assert naming == ["methods/tool_calls.py", "running/routes.py"]
