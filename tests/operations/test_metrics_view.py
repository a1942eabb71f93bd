"""The /metrics view: 404, 403 or 401 unless METRICS_ACCESS lets the caller in; then the text format."""
import pytest
from django.conf import settings
from django.contrib.auth.models import User
from django.test import AsyncClient, override_settings
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.django_db(transaction=True)

TOKEN = "metrics-token-4f1c9a"


def access(mode, token=None):
    return override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, "METRICS_ACCESS": mode, "METRICS_TOKEN": token})


def assert_exposition(response):
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain; version=")
    names = {family.name for family in text_string_to_metric_families(response.content.decode())}
    assert {"mcp_sessions_created", "mcp_replays", "mcp_buffer_entries", "mcp_open_streams"} <= names


async def test_off_is_404_for_everyone():
    staff = await User.objects.acreate(username="ops-off", is_staff=True)
    client = AsyncClient()
    await client.aforce_login(staff)
    with access("off"):
        assert (await client.get("/metrics")).status_code == 404
        assert (await AsyncClient().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})).status_code == 404


async def test_staff_only():
    with access("staff"):
        assert (await AsyncClient().get("/metrics")).status_code == 403
        plain = await User.objects.acreate(username="ops-plain")
        client = AsyncClient()
        await client.aforce_login(plain)
        assert (await client.get("/metrics")).status_code == 403
        staff = await User.objects.acreate(username="ops-staff", is_staff=True)
        await client.aforce_login(staff)
        assert_exposition(await client.get("/metrics"))


@pytest.mark.parametrize("header", [None, "Bearer wrong-token", f"Basic {TOKEN}", "Bearer ", TOKEN])
async def test_token_refused_is_401_with_a_challenge(header):
    headers = {"Authorization": header} if header is not None else {}
    with access("token", TOKEN):
        response = await AsyncClient().get("/metrics", headers=headers)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Bearer")


async def test_token_accepted():
    with access("token", TOKEN):
        assert_exposition(await AsyncClient().get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}))


async def test_staff_session_does_not_replace_the_token():
    staff = await User.objects.acreate(username="ops-token-staff", is_staff=True)
    client = AsyncClient()
    await client.aforce_login(staff)
    with access("token", TOKEN):
        assert (await client.get("/metrics")).status_code == 401


async def test_only_get():
    with access("token", TOKEN):
        response = await AsyncClient().post("/metrics", headers={"Authorization": f"Bearer {TOKEN}"})
    assert response.status_code == 405


def test_collector_without_a_snapshot_reads_one_on_each_collect():
    """For a registry of one's own (e.g. prometheus_client.start_http_server), from sync code."""
    from prometheus_client import CollectorRegistry, generate_latest

    from mcp_transport.prometheus import McpCollector

    registry = CollectorRegistry()
    registry.register(McpCollector())
    families = {family.name for family in text_string_to_metric_families(generate_latest(registry).decode())}
    assert {"mcp_sessions_created", "mcp_jobs_active", "mcp_job_duration_seconds"} <= families
