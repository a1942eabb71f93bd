from django.apps import AppConfig


class LibraryConfig(AppConfig):
    name = "tools.library"
    label = "library"
    verbose_name = "Example library (models as MCP tools)"
    default_auto_field = "django.db.models.BigAutoField"
