"""The admin: sessions (list, page, actions, the dashboard) and background jobs (autodiscovered
like any admin.py)."""
from . import jobs, sessions  # noqa: F401  (registers the model admins)
