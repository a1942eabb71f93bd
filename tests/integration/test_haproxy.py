"""haproxy round robin, no stickiness, in front of four daphnes: the configuration of
docs/deployment.md ("Redis at scale"), run as written but for its ports. Every request of a
session may reach another instance; calls, resumes and cancels still work."""
import json
import re
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from mcp import Client

from mcp_transport.testing import HttpClient, free_port


ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.filterwarnings("ignore:The logging capability is deprecated")]


def documented_config() -> str:
    text = (ROOT / "docs" / "deployment.md").read_text()
    return re.search(r"```haproxy\n(.*?)```", text, re.S).group(1)


def front(daphnes, directory, balance=None):
    """haproxy with the documented configuration, in front of ``daphnes`` (its first server lines,
    the others left out; ``balance``: another algorithm), and a stats socket of the test's,
    ``directory / "stats.sock"``, to read what its health checks found. Returns (the process, the
    /mcp URL)."""
    if not shutil.which("haproxy"):
        pytest.skip("haproxy is not installed (make haproxy installs Debian's where it can)")
    port = free_port()
    config = documented_config().replace("bind 127.0.0.1:8000", f"bind 127.0.0.1:{port}")
    for number in range(1, 5):
        if number > len(daphnes):
            config = re.sub(rf"\n *server daphne{number} [^\n]*", "", config)
            continue
        address = daphnes[number - 1].url.split("//")[1].split("/")[0]
        config = re.sub(rf"127\.0\.0\.1:800{number}\b", address, config)
    assert "127.0.0.1:800" not in config
    if balance is not None:
        config = config.replace("balance roundrobin", f"balance {balance}")
    config = config.replace("global\n", f"global\n    stats socket {directory / 'stats.sock'} mode 600\n", 1)
    path = directory / "haproxy.cfg"
    path.write_text(config)
    subprocess.run(["haproxy", "-c", "-q", "-f", str(path)], check=True)
    process = subprocess.Popen(["haproxy", "-db", "-f", str(path)], stdout=subprocess.DEVNULL,
                               stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            assert time.monotonic() < deadline, "haproxy did not listen"
            time.sleep(0.1)
    return process, f"http://127.0.0.1:{port}/mcp"


@pytest.fixture(scope="module")
def haproxy_run(start_server, tmp_path_factory):
    """(the /mcp URL through haproxy, the path of its stats socket)."""
    directory = tmp_path_factory.mktemp("haproxy")
    process, url = front([start_server() for _ in range(4)], directory)
    yield url, directory / "stats.sock"
    process.terminate()
    process.wait(10)


@pytest.fixture(scope="module")
def haproxy(haproxy_run):
    return haproxy_run[0]


def test_the_health_check_of_the_recipe_passes_on_every_daphne(haproxy_run):
    """The recipe checks each daphne at GET /readyz and expects 200: haproxy's own statistics
    say every one of them is up by that check (a path that answered anything else, as /mcp's 4xx
    would, leaves them down after two checks)."""
    from .waiting import eventually

    def checked():
        with socket.socket(socket.AF_UNIX) as stats:
            stats.connect(str(haproxy_run[1]))
            stats.sendall(b"show stat\n")
            text = b"".join(iter(lambda: stats.recv(65536), b"")).decode()
        header, *rows = [line.split(",") for line in text.lstrip("# ").splitlines() if line]
        servers = [dict(zip(header, row)) for row in rows]
        assert {server["svname"]: (server["status"], server["check_status"]) for server in servers
                if server["pxname"] == "daphnes" and server["svname"].startswith("daphne")} == {
            f"daphne{n}": ("UP", "L7OK") for n in range(1, 5)}

    eventually(checked, deadline=30)


def test_a_session_works_whichever_instance_each_request_reaches(haproxy):
    client = HttpClient(haproxy)
    client.initialize()
    for n in range(12):  # three rounds over the four instances
        reply = client.call("tools/call", {"name": "echo", "arguments": {"text": f"#{n}"}})
        assert reply["result"]["structuredContent"] == {"result": f"#{n}"}, reply


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_the_sdk_client_calls_with_progress_through_haproxy(haproxy, mode):
    seen = []

    async def on_progress(progress, total, message):
        seen.append(progress)

    async with Client(haproxy, mode=mode) as client:
        for _ in range(3):
            seen.clear()
            result = await client.call_tool("slow_progress", {"steps": 4, "interval_ms": 10},
                                            progress_callback=on_progress)
            assert result.content[0].text == "done 4" and seen == [1, 2, 3, 4]


def test_a_dropped_stream_resumes_through_haproxy_exactly_once(haproxy):
    client = HttpClient(haproxy)
    client.initialize()
    call = client.message("tools/call", {"name": "slow_progress", "arguments": {"steps": 8, "interval_ms": 50},
                                          "_meta": {"progressToken": "t"}})
    stream = client.stream("POST", call)
    stream.next_event()  # priming
    seen = [json.loads(stream.next_event().data) for _ in range(2)]
    last_id = stream.decoder.last_event_id
    stream.close()  # the network drops; the resume reaches whichever instance is next
    resumed = client.stream("GET", headers={"Accept": "text/event-stream", "Last-Event-ID": last_id})
    assert resumed.status == 200
    seen += resumed.messages(timeout=20)
    progress = [m["params"]["progress"] for m in seen if m.get("method") == "notifications/progress"]
    assert progress == list(range(1, 9))
    assert len([m for m in seen if m.get("id") == call["id"]]) == 1


def test_a_cancel_through_haproxy_stops_the_tool(haproxy):
    client = HttpClient(haproxy)
    client.initialize()
    call = client.message("tools/call", {"name": "slow_progress", "arguments": {"steps": 100, "interval_ms": 50},
                                          "_meta": {"progressToken": 1}})
    stream = client.stream("POST", call)
    stream.next_event()
    stream.next_event()
    cancel = client.message("notifications/cancelled", {"requestId": call["id"]}, request_id=False)
    assert client.request("POST", cancel).status == 202  # most likely another instance
    rest = stream.messages(timeout=10)
    assert all("result" not in m and "error" not in m for m in rest) and len(rest) < 60
