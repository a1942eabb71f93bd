"""The project's Celery app (Celery's "First steps with Django" recipe)."""
import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "mcpserver.settings")

app = Celery("mcpserver")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
