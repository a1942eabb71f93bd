"""``manage.py mcp_sessions list|show|terminate|purge|cleanup``: sessions from the command line.

    manage.py mcp_sessions list [--all] [--limit 50] [--json]
    manage.py mcp_sessions show <id or unique prefix> [--json]
    manage.py mcp_sessions terminate <id> [<id> ...]   # as a DELETE: streams end, then 404
    manage.py mcp_sessions purge <id> [<id> ...]       # drop buffered events, keep the session
    manage.py mcp_sessions cleanup [--json]            # the retention settings, once (cron)

Session ids may start with "-": put ``--`` before them (``mcp_sessions terminate -- -Xy3...``).
"""
import json

from asgiref.sync import async_to_sync
from django.core.management.base import BaseCommand, CommandError
from django.core.serializers.json import DjangoJSONEncoder

from ... import operations
from ...models import McpSession
from ...protocol.session import SessionState

LIST_COLUMNS = ("id", "state", "user", "client", "protocol", "created", "last seen")


class Command(BaseCommand):
    help = "List, inspect, terminate MCP sessions, purge their buffered events, or run the cleanup."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True, metavar="{list,show,terminate,purge,cleanup}")
        listing = actions.add_parser("list", help="Sessions, most recently seen first (open ones unless --all).")
        listing.add_argument("--all", action="store_true", help="Include closed sessions.")
        listing.add_argument("--limit", type=int, default=50)
        listing.add_argument("--json", action="store_true", help="One JSON array instead of a table.")
        show = actions.add_parser("show", help="One session: its row, its live copy in Redis and its streams.")
        show.add_argument("session")
        show.add_argument("--json", action="store_true")
        for name, text in (("terminate", "Close sessions everywhere, as a DELETE would."),
                           ("purge", "Drop the buffered events of sessions (Redis and database).")):
            actions.add_parser(name, help=text).add_argument("sessions", nargs="+")
        actions.add_parser("cleanup", help="Apply the retention settings once.").add_argument(
            "--json", action="store_true")

    def handle(self, *args, action, **options):
        try:
            getattr(self, f"do_{action}")(**options)
        except operations.SessionNotFound as exc:
            raise CommandError(str(exc)) from None

    def do_list(self, *, all, limit, json, **_):  # noqa: A002 (the option's name)
        rows = McpSession.objects.select_related("user").order_by("-last_seen_at")
        if not all:
            rows = rows.exclude(state=SessionState.CLOSED.value)
        table = [_summary(row) for row in rows[:limit]]
        if json:
            return self.write_json(table)
        self.write_table(LIST_COLUMNS, [[entry[column] for column in LIST_COLUMNS] for entry in table])

    def do_show(self, *, session, json, **_):
        details = async_to_sync(operations.describe)(session)
        if json:
            return self.write_json(details)
        for name, value in details.items():
            if name != "streams":
                self.stdout.write(f"{name:>18}: {_text(value)}")
        self.stdout.write("")
        self.write_table(("stream", "store", "database"),
                         [[entry["stream"], entry["store"], entry["database"]] for entry in details["streams"]])

    def do_terminate(self, *, sessions, **_):
        for session in sessions:
            closed = async_to_sync(operations.terminate)(session)
            self.stdout.write(f"{session}: {'terminated' if closed else 'already closed'}")

    def do_purge(self, *, sessions, **_):
        for session in sessions:
            dropped = async_to_sync(operations.purge_buffers)(session)
            self.stdout.write(f"{session}: {dropped} buffered events dropped")

    def do_cleanup(self, *, json, **_):
        report = async_to_sync(operations.cleanup)().as_dict()
        if json:
            return self.write_json(report)
        self.stdout.write(", ".join(f"{name.replace('_', ' ')}: {value}" for name, value in report.items()))

    def write_json(self, value):
        self.stdout.write(json.dumps(value, cls=DjangoJSONEncoder, indent=2))

    def write_table(self, header, rows):
        rows = [[_text(cell) for cell in row] for row in rows]
        widths = [max(len(str(cell)) for cell in column) for column in zip(header, *rows)]
        for row in (header, *rows):
            self.stdout.write("  ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip())


def _summary(row) -> dict:
    return {"id": row.id, "state": row.state if row.is_open else f"closed ({row.closed_reason})",
            "user": str(row.user) if row.user_id else "-", "client": f"{row.client_name} {row.client_version}".strip(),
            "protocol": row.protocol_version, "created": row.created_at, "last seen": row.last_seen_at}


def _text(value) -> str:
    if value is None:
        return "-"
    if hasattr(value, "isoformat"):
        return value.isoformat(timespec="seconds")
    return json.dumps(value) if isinstance(value, dict) else str(value)
