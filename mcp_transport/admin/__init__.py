"""The admin: sessions (list, page, actions, the dashboard), background jobs, the calls of both eras
and static tokens (autodiscovered like any admin.py)."""
from . import calls, jobs, sessions, tokens  # noqa: F401  (registers the model admins)
