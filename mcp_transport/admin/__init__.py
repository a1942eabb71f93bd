"""The admin: sessions (list, page, actions) and the dashboard (autodiscovered like any admin.py)."""
from . import sessions  # noqa: F401  (registers the model admins)
