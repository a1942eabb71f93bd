"""Async tests here use the ORM through asgiref's one sync thread (database_sync_to_async):
close that thread's connections after each test, or PostgreSQL refuses to drop the test
database at the end of the run ("is being accessed by other users")."""
import pytest
from asgiref.sync import sync_to_async
from django.db import connections


@pytest.fixture(autouse=True)
async def close_sync_thread_connections():
    yield
    await sync_to_async(connections.close_all)()
