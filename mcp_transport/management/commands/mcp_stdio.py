"""``manage.py mcp_stdio [--user USERNAME]``: serve this project's tools, resources and prompts
to one client over stdin/stdout (Claude Desktop, IDEs). Logs go to stderr; see docs/stdio.md."""
import asyncio
import os
import sys

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db import connections

from ...transports import stdio


class Command(BaseCommand):
    help = "Serve MCP over stdio: newline-delimited JSON-RPC on stdin and stdout, logs on stderr."
    # Start at once and print nothing a client could read: `manage.py check` runs the checks.
    requires_system_checks = []

    def add_arguments(self, parser):
        parser.add_argument("--user", help="Username of the Django user the tools see as ctx.user "
                                           "(default: AnonymousUser).")

    def handle(self, *args, **options):
        user = self.load_user(options["user"]) if options["user"] else None
        connections.close_all()  # the ORM runs in asgiref's thread from here on
        asyncio.run(stdio.main(self.protocol_output(), user))

    @staticmethod
    def load_user(username):
        try:
            user = get_user_model()._default_manager.get_by_natural_key(username)
        except get_user_model().DoesNotExist:
            raise CommandError(f"No user named {username!r}.") from None
        # Loaded now, as auth.load_user does: tools/list asks has_perm() on the event loop,
        # where a query raises SynchronousOnlyOperation.
        user.get_all_permissions()
        return user

    @staticmethod
    def protocol_output():
        """The real stdout for the protocol alone; file descriptor 1 and ``sys.stdout`` then
        point at stderr, so that a stray print() in a tool cannot corrupt the stream."""
        out = os.fdopen(os.dup(sys.stdout.fileno()), "wb", buffering=0)
        sys.stdout.flush()
        os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
        sys.stdout = sys.stderr
        return out
