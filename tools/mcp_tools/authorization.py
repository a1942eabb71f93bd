"""Per-tool authorization (scopes, a Django permission) on a tool, a resource and a prompt; and two
sync tools that reach outside the call: the client's roots, the server's own log.
"""
import logging

from mcp_transport import Context, prompt, resource, tool


# --- Per-tool authorization: absent from the lists, and refused, for callers who may not use them --

@tool(scopes=["reports"], structured_output=False)
def sales_report(day: str) -> str:
    """A report that needs a token with the "reports" scope (others get 403 insufficient_scope).

    Args:
        day: The day, YYYY-MM-DD.
    """
    return f"Sales on {day}: 42."


@tool(background=True, permission="auth.view_user", structured_output=False)
def count_users(ctx: Context) -> str:
    """How many users there are, counted in a worker; for users with the auth.view_user permission."""
    from django.contrib.auth import get_user_model

    return f"{get_user_model().objects.count()} users"


@resource("users://directory", mime_type="text/plain", permission="auth.view_user")
def user_directory() -> str:
    """The usernames, for users with the auth.view_user permission."""
    from django.contrib.auth import get_user_model

    return "\n".join(get_user_model().objects.order_by("username").values_list("username", flat=True))


@prompt(scopes=["reports"])
def report_summary(day: str) -> str:
    """Ask for a summary of a day's report (tokens with the "reports" scope)."""
    return f"Summarize the sales report of {day}."


@tool
def client_roots(ctx: Context) -> list[str]:
    """List the client's roots (roots/list, a server-to-client request from a sync tool)."""
    return [root["uri"] for root in ctx.list_roots()]


@tool
def server_log(text: str) -> str:
    """Write text to the server's own log (Python logging), not to the client.

    Args:
        text: The line to log; the record carries the MCP session and request ids.
    """
    logging.getLogger("tools").warning("%s", text)
    return "logged"
