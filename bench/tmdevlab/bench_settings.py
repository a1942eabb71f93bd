"""The example project's settings as a new project would have them for the v2 workload: its own app
(``benchapp``: the three tools) instead of the example's tool catalogue."""
from mcpserver.settings import *  # noqa: F401,F403
from mcpserver.settings import INSTALLED_APPS

INSTALLED_APPS = [app for app in INSTALLED_APPS if app not in ("tools", "tools.library")] + ["benchapp"]
