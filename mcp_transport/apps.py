from django.apps import AppConfig, apps
from django.utils.module_loading import autodiscover_modules


class McpTransportConfig(AppConfig):
    name = "mcp_transport"
    verbose_name = "MCP transport"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from . import checks  # noqa: F401  (registers the system checks)
        from celery import current_app

        from . import operations  # registers the Celery task mcp_transport.cleanup
        # Registers mcp_transport.run_job, so that every Celery worker of the project (Celery's
        # Django recipe sets Django up before the worker consumes) runs background tools,
        # whether or not any module of the project imports the worker side.
        from .running import worker  # noqa: F401
        from .auth.tokens import connect_signals
        from .connections.broker import ride_out_broker_losses
        from .conf import get_config
        from .logs import quote_client_values
        from .transports.draining import drain_on_sigterm
        from .transports.serving import (close_connections_after_django_requests, enforce_request_limits,
                                         flush_events_at_shutdown)

        # Import every installed app's tools module, as the admin does with admin.py, and its
        # MCP Apps views (mcp_apps.py: docs/apps.md).
        autodiscover_modules(get_config()["TOOLS_MODULE"], "mcp_apps")
        # Then each app's skills/<name>/SKILL.md folders, as Django finds templates (a skill the
        # tools modules registered in code stays: methods/skill_catalog.py).
        from .methods import skill_catalog

        skill_catalog.discover()
        from .methods import discovery

        discovery.install()  # TOOL_DISCOVERY "search": search_tools and call_tool, and their index
        from .state import switches

        switches.listen()  # the tools an operator switched off, on every process
        flush_events_at_shutdown()
        close_connections_after_django_requests()  # under ASGI each request's thread is its own
        connect_signals()  # revoking a token takes effect on the next request
        enforce_request_limits()
        drain_on_sigterm()  # a rolling deploy loses no call (transports/draining.py)
        connect_layers()
        quote_client_values()  # libraries' log lines show a client's values as ours do (logs.py)
        operations.schedule_cleanup(current_app)  # beat runs the retention cleanup
        # A worker on a Redis or Sentinel broker outlives a lost connection (connections/broker.py).
        ride_out_broker_losses(current_app)
        if apps.is_installed("corsheaders"):
            # CORS for browsers from ALLOWED_ORIGINS: the one list (cors.py).
            from corsheaders.signals import check_request_enabled

            from .cors import allowed_by_mcp_transport
            check_request_enabled.connect(allowed_by_mcp_transport, dispatch_uid="mcp_transport.cors")


def connect_layers():
    """The calls that go up the package's layers (docs/development.md, "Package layout"), made
    through hooks the lower module offers, so that no module imports one above it."""
    from . import auth, tracing
    from .eras.legacy_2025 import tasks
    from .eras.modern_2026 import methods as modern_methods
    from .methods import dispatch
    from .running.jobs import settling
    from .state import control, quotas, sessions

    dispatch.serve_tasks(tasks)  # the 2025-11-25 tasks utility: tasks/*, task-augmented calls
    sessions.on_close(settling.end_session_jobs)  # a closed session's background jobs end with it
    quotas.on_reclaim(settling.watch_job)  # a caller at its limit frees the places of lost jobs
    control.on_message("closed", sessions.forget)  # its quick-resume copy in each process too
    control.on_message("auth_forget", auth.forget_local)  # a revoked token, in each process's cache
    control.on_message("auth_forget", auth.end_streams)  # and the streams opened with it
    control.on_message("auth_created", auth.forget_local)  # a new token: no process refuses it from before
    tracing.known_target = dispatch.is_known_target  # span names: only registered tools and prompts
    tracing.target_of = dispatch.target_of  # the target each method declares (methods/specs.py)
    # The methods a metric names; any other is _OTHER (both eras' tables, the tasks utility's in).
    tracing.method_names = frozenset({"initialize", *dispatch.METHODS, *modern_methods.METHODS})
