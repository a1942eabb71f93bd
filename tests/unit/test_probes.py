"""probes.py in the test process: ProbesMiddleware in both of Django's modes (the test Client
runs the sync middleware chain, the AsyncClient the async one), and what /readyz logs: a line
per change of readiness, not one per probe. Redis is the run's own; a refused one is a closed
port. (tests/integration/test_probes.py stalls and stops real ones under a daphne.)"""
import logging

import pytest
from django.conf import settings
from django.test import AsyncClient, Client, override_settings

from mcp_transport.testing import free_port

#: The database check runs in a thread of its own.
pytestmark = pytest.mark.django_db(transaction=True)
POD = "10.244.3.17:8000"
READY = {"redis": "ok", "database": "ok"}


@override_settings(SECURE_SSL_REDIRECT=True)
def test_the_sync_chain_answers_the_probes_for_a_pod_address_over_plain_http():
    client = Client(headers={"Host": POD})
    assert (client.get("/healthz").status_code, client.get("/healthz").content) == (200, b"ok\n")
    ready = client.get("/readyz")
    assert (ready.status_code, ready.json(), ready["Cache-Control"]) == (200, READY, "no-store")
    assert client.head("/readyz").status_code == 200
    assert client.post("/readyz").status_code == 405
    assert client.get("/admin/login/").status_code == 400  # the host check is on for the rest
    assert Client().get("/admin/login/").status_code == 301  # and so is the redirect to HTTPS


@override_settings(SECURE_SSL_REDIRECT=True)
async def test_the_async_chain_answers_the_probes_for_a_pod_address_over_plain_http():
    client, pod = AsyncClient(), {"Host": POD}
    assert (await client.get("/healthz", headers=pod)).status_code == 200
    ready = await client.get("/readyz", headers=pod)
    assert (ready.status_code, ready.json()) == (200, READY)
    assert (await client.get("/admin/login/", headers=pod)).status_code == 400


async def test_readyz_logs_each_change_of_readiness_once(caplog):
    client = AsyncClient()
    refused = f"redis://127.0.0.1:{free_port()}/0"
    caplog.set_level(logging.INFO, logger="mcp_transport.probes")
    with override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "REDIS_URL": refused}):
        for _ in range(3):
            response = await client.get("/readyz")
            assert (response.status_code, response.json()) == (503, {"redis": "failed (ConnectionError)",
                                                                      "database": "ok"})
    assert (await client.get("/readyz")).status_code == 200
    assert (await client.get("/readyz")).status_code == 200
    lines = [(record.levelname, record.getMessage()) for record in caplog.records
             if record.name.startswith(("mcp_transport.probes", "django.request"))]
    assert [(level, message.split(":")[0]) for level, message in lines] == [("WARNING", "not ready"),
                                                                           ("INFO", "ready")]
    assert "redis failed (ConnectionError): " in lines[0][1] and "database ok" in lines[0][1]
