"""A host's WSGI module that reads the database when it is imported (a warm-up): under
``gunicorn --preload`` the master then holds a pooled connection, and the pool it came from,
when it forks its workers (tests/hardening/test_pooled_processes.py)."""

from django.db import connection

from example_project.wsgi import application

with connection.cursor() as cursor:
    cursor.execute("SELECT count(*) FROM memory_engine_project")

__all__ = ["application"]
