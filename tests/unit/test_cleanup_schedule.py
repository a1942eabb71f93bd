"""The app puts its retention cleanup on Celery beat's schedule (operations.schedule_cleanup),
so a project that follows Celery's Django recipe gets it without a setting of its own."""
from celery import Celery, current_app
from django.conf import settings
from django.test import override_settings

from mcp_transport import operations


def configured(**keys):
    return override_settings(MCP_TRANSPORT={**settings.MCP_TRANSPORT, **keys})


def app(schedule=None):
    celery = Celery("scheduled", set_as_current=False)
    if schedule is not None:
        celery.conf.beat_schedule = schedule
    return celery


def test_an_empty_schedule_gets_the_cleanup_every_cleanup_interval():
    celery = app()
    with configured(CLEANUP_INTERVAL=120):
        assert operations.schedule_cleanup(celery)
    assert celery.conf.beat_schedule == {"mcp-transport-cleanup": {"task": "mcp_transport.cleanup", "schedule": 120.0}}


def test_the_projects_own_entry_for_the_task_wins_and_other_entries_stay():
    own = {"cleanup-hourly": {"task": "mcp_transport.cleanup", "schedule": 3600.0},
           "reports": {"task": "reports.nightly", "schedule": 86400.0}}
    celery = app(dict(own))
    assert not operations.schedule_cleanup(celery)
    assert celery.conf.beat_schedule == own
    celery = app({"reports": own["reports"]})
    assert operations.schedule_cleanup(celery)
    assert set(celery.conf.beat_schedule) == {"reports", "mcp-transport-cleanup"}


def test_none_schedules_nothing():
    celery = app()
    with configured(CLEANUP_INTERVAL=None):
        assert not operations.schedule_cleanup(celery)
    assert celery.conf.beat_schedule == {}


def test_the_running_projects_app_has_the_task_on_its_schedule():
    """Django's ready() did it for the example project's app (which names its own entry)."""
    tasks = [entry["task"] for entry in current_app.conf.beat_schedule.values()]
    assert tasks.count("mcp_transport.cleanup") == 1
