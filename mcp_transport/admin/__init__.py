"""The admin: sessions (list, page, actions, the dashboard) background jobs and static tokens (autodiscovered
like any admin.py)."""
from . import jobs, sessions, tokens  # noqa: F401  (registers the model admins)
