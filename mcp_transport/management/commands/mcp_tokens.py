"""``manage.py mcp_tokens create|revoke|list``: bearer tokens for machine clients.

    manage.py mcp_tokens create --user alice [--scope "mcp reports"] [--expires 30d|12h|90s] [--name ci]
    manage.py mcp_tokens revoke TOKEN
    manage.py mcp_tokens list [--user alice]

``create`` makes the user if needed and prints the token alone on its last line; it is shown
this once (only its SHA-256 is stored). Revoking takes effect on the next request.
"""
from django.core.management.base import BaseCommand, CommandError

from ...auth import tokens
from ...conf import get_config
from ...models import McpToken
from ...protocol.auth import parse_duration


class Command(BaseCommand):
    help = "Create, revoke or list static bearer tokens for MCP machine clients."

    def add_arguments(self, parser):
        actions = parser.add_subparsers(dest="action", required=True, metavar="{create,revoke,list}")
        create = actions.add_parser("create", help="A new token; printed once, on the last line.")
        create.add_argument("--user", required=True, help="Its user (created if needed).")
        create.add_argument("--scope", help="Space-separated scopes (default: AUTH_REQUIRED_SCOPES).")
        create.add_argument("--expires", help="Lifetime such as 90s, 15m, 12h, 30d, 2w (default: never).")
        create.add_argument("--name", default="", help="What the token is for.")
        actions.add_parser("revoke", help="Refuse a token from the next request on.").add_argument("token")
        listing = actions.add_parser("list", help="Tokens (their prefixes), newest first.")
        listing.add_argument("--user")

    def handle(self, *args, action, **options):
        getattr(self, f"do_{action}")(**options)

    def do_create(self, *, user, scope, expires, name, **_):
        try:
            lifetime = parse_duration(expires) if expires else None
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if scope is None:
            scope = " ".join(get_config()["AUTH_REQUIRED_SCOPES"])
        row, secret = tokens.create(user, scope, lifetime, name)
        expiry = row.expires_at.isoformat() if row.expires_at else "never"
        self.stdout.write(f"Token {row.prefix}… for {row.user} (scope {row.scope or '-'}, expires {expiry}). "
                          "It is shown only now:")
        self.stdout.write(secret)

    def do_revoke(self, *, token, **_):
        if not tokens.revoke(token.strip()):
            raise CommandError("No active token has this value.")
        self.stdout.write("Revoked.")

    def do_list(self, *, user, **_):
        from django.contrib.auth import get_user_model

        rows = McpToken.objects.select_related("user")
        if user:
            rows = rows.filter(**{f"user__{get_user_model().USERNAME_FIELD}": user})
        for row in rows[:500]:
            expiry = row.expires_at.isoformat() if row.expires_at else "never"
            self.stdout.write(f"{row.prefix}…  {row.user}  {row.status}  scope={row.scope or '-'}  "
                              f"expires={expiry}  {row.name}")
