from django.apps import AppConfig


class LibraryConfig(AppConfig):
    name = "library"
    verbose_name = "Example library (models as MCP tools)"
    default_auto_field = "django.db.models.BigAutoField"
