"""memory_engine.fork_safety: a forked process opens its own connections and pool; the engine's
threads give theirs back. With real processes and the real server: the example project's
settings (a psycopg pool per process by default), ``os.fork`` as django-q2 and gunicorn do it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from typing import Any

from django.db import connection

from memory_engine.fork_safety import closes_connections

from .conftest import ROOT

FORK_AFTER_THE_POOL_OPENED = """
import json, os, threading
import django
django.setup()
from django.db import connection

def backend_pid():
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        return cursor.fetchone()[0]

parent_before = backend_pid()  # the pool is open, its connection checked out by this thread
reader, writer = os.pipe()
child = os.fork()
if child == 0:
    seen = {"child": backend_pid()}
    def another():  # a second connection at once: only a pool whose own threads run can open it
        seen["child_thread"] = backend_pid()
        connection.close()
    thread = threading.Thread(target=another)
    thread.start()
    thread.join()
    os.write(writer, json.dumps(seen).encode())
    os._exit(0)
os.waitpid(child, 0)
seen = json.loads(os.read(reader, 1000))
seen.update(parent_before=parent_before, parent_after=backend_pid())
print(json.dumps(seen))
"""


def test_a_forked_process_opens_its_own_connections_and_pool(db: Any) -> None:
    """The parent opened the pool and holds a connection when it forks (qcluster's system checks,
    a gunicorn master that preloads and warms up): the child talks on server sessions of its
    own, from a pool of its own that grows, and the parent's session survives the child."""
    env = {**os.environ, "MEMORY_ENGINE_DB_NAME": connection.settings_dict["NAME"], "DB_POOL_MAX_SIZE": "4",
           "DJANGO_SETTINGS_MODULE": "example_project.settings"}
    done = subprocess.run([sys.executable, "-c", FORK_AFTER_THE_POOL_OPENED], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["parent_after"] == seen["parent_before"]  # the child did not end the parent's session
    assert len({seen["parent_before"], seen["child"], seen["child_thread"]}) == 3, seen


def test_a_thread_of_the_engine_gives_its_connection_back(db: Any) -> None:
    opened: list[Any] = []

    @closes_connections
    def work() -> None:
        with connection.cursor() as cursor:  # this thread's own connection
            cursor.execute("SELECT 1")
        opened.append(connection.connection)

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    assert opened and opened[0] is not connection.connection
    assert opened[0].closed
