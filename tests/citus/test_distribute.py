"""``manage.py memory_engine_distribute`` on the cluster (issue 73), run as an operator runs it:
``migrate`` then the command, each a process of its own against the coordinator's database.

What it places (every engine table with ``project_id`` but the API keys distributed and
co-located with the stores; the shared tables and ``auth_user`` reference tables; Django's other
tables Citus local tables on the coordinator), that ``--dry-run`` changes nothing, that a second
run does nothing, and that system check memory_engine.E030 names what a later change left out
until the command runs again."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from memory_engine.distribution import ANCHOR

from .cluster import CitusCluster
from .schema import ROOT, database_url, migrate

pytestmark = pytest.mark.timeout(900)

DATABASE = "memory_engine_distribute"


def manage(cluster: CitusCluster, *args: str, database: str = DATABASE) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, DATABASE_URL=database_url(cluster, database), DB_POOL_MAX_SIZE="0",
               DJANGO_SETTINGS_MODULE="example_project.settings")
    return subprocess.run([sys.executable, str(ROOT / "manage.py"), *args], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=300, check=False)


def placed(cluster: CitusCluster, database: str = DATABASE) -> dict[str, str]:
    rows = cluster.coordinator.execute("SELECT table_name::text, citus_table_type FROM citus_tables", dbname=database)
    return dict(rows)


@pytest.fixture(scope="module")
def dry_run(citus_cluster: CitusCluster) -> dict[str, Any]:
    """The migrated database, ``--dry-run``'s output and what was placed after it."""
    migrate(citus_cluster, DATABASE)
    done = manage(citus_cluster, "memory_engine_distribute", "--dry-run")
    return {"done": done, "placed": placed(citus_cluster)}


@pytest.fixture(scope="module")
def distributed(dry_run: dict[str, Any], citus_cluster: CitusCluster) -> Iterator[subprocess.CompletedProcess[str]]:
    done = manage(citus_cluster, "memory_engine_distribute")
    assert done.returncode == 0, done.stderr[-3000:]
    yield done


def test_the_dry_run_prints_the_sql_and_changes_nothing(dry_run: dict[str, Any]) -> None:
    done = dry_run["done"]
    assert done.returncode == 0, done.stderr[-3000:]
    assert "34 to distribute by project_id" in done.stdout
    assert "SELECT create_reference_table('memory_engine_project');" in done.stdout
    assert (f"SELECT create_distributed_table('memory_engine_memory', 'project_id', colocate_with => '{ANCHOR}');"
            in done.stdout)
    assert done.stdout.index("create_reference_table") < done.stdout.index("create_distributed_table")
    assert "ALTER DATABASE \"memory_engine_distribute\" SET citus.propagate_set_commands = 'local';" in done.stdout
    assert dry_run["placed"] == {}


def test_every_engine_table_is_placed_by_its_role(distributed: Any, citus_cluster: CitusCluster) -> None:
    tables = placed(citus_cluster)
    engine = {name: kind for name, kind in tables.items() if name.startswith("memory_engine_")}
    assert sum(kind == "distributed" for kind in engine.values()) == 34
    assert {name for name, kind in engine.items() if kind == "reference"} == {
        "memory_engine_apikey", "memory_engine_project", "memory_engine_embeddingmodel", "memory_engine_staffgrants"}
    assert tables["auth_user"] == "reference"  # a project's members reference it
    assert tables["django_admin_log"] == "local"  # a Citus local table: it stays on the coordinator
    assert "memory_engine_lexical_index_state" not in tables  # a plain table of the coordinator
    # one co-location group: a project's rows of every table on the same node
    groups = citus_cluster.coordinator.execute(
        "SELECT count(DISTINCT colocation_id) FROM citus_tables WHERE citus_table_type = 'distributed'",
        dbname=DATABASE)
    assert groups == [(1,)]


def test_foreign_keys_and_triggers_come_back(distributed: Any, citus_cluster: CitusCluster) -> None:
    rows = citus_cluster.coordinator.execute("""
        SELECT count(*) FILTER (WHERE contype = 'f'),
               (SELECT count(*) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid
                WHERE NOT t.tgisinternal AND c.relname LIKE 'memory_engine_%%')
        FROM pg_constraint WHERE conrelid::regclass::text LIKE 'memory_engine_%%'""", dbname=DATABASE)
    foreign_keys, triggers = rows[0]
    assert foreign_keys >= 79
    assert triggers == 22
    # the shards carry the triggers: each of a worker's shards of the memories has the feed's
    with citus_cluster.workers[0].connect(DATABASE) as conn:
        conn.execute("SET citus.override_table_visibility = off")  # show the shards
        shards, with_trigger = conn.execute(r"""
            SELECT count(*), count(*) FILTER (WHERE EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = c.oid
                                                            AND t.tgname LIKE 'memory_engine_feed_memory_%'))
            FROM pg_class c WHERE c.relname ~ '^memory_engine_memory_[0-9]+$'""").fetchone()
    assert shards == with_trigger > 0


def test_the_settings_reach_the_workers(distributed: Any, citus_cluster: CitusCluster) -> None:
    for node in citus_cluster.nodes:
        settings = node.execute("""SELECT unnest(setconfig) FROM pg_db_role_setting s JOIN pg_database d
                                   ON d.oid = s.setdatabase WHERE d.datname = %s""", [DATABASE], dbname=DATABASE)
        found = {row[0] for row in settings}
        assert {"citus.propagate_set_commands=local", "hnsw.iterative_scan=relaxed_order",
                "plan_cache_mode=force_custom_plan"} <= found, node


def test_a_second_run_does_nothing(distributed: Any, citus_cluster: CitusCluster) -> None:
    again = manage(citus_cluster, "memory_engine_distribute")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "nothing to do" in again.stdout
    check = manage(citus_cluster, "check", "--database", "default")
    assert check.returncode == 0, check.stderr[-3000:]


def test_django_numbers_new_rows_of_the_tables_citus_made_local(distributed: Any, citus_cluster: CitusCluster) -> None:
    """What a later ``migrate`` does when it adds a model: a content type and its permissions,
    in tables Citus made local (they reference ``auth_user``'s or each other's) with a new identity
    sequence of their own. The command moved those sequences past their rows."""
    created = manage(citus_cluster, "shell", "-c", (
        "from django.contrib.auth.models import Permission\n"
        "from django.contrib.contenttypes.models import ContentType\n"
        "kind = ContentType.objects.create(app_label='later', model='thing')\n"
        "Permission.objects.create(content_type=kind, codename='view_thing', name='Can view thing')\n"
        "print('created', kind.pk)"))
    try:
        assert created.returncode == 0, created.stderr[-3000:]
        assert "created" in created.stdout
    finally:
        for statement in ("DELETE FROM auth_permission WHERE content_type_id IN "
                          "(SELECT id FROM django_content_type WHERE app_label = 'later')",
                          "DELETE FROM django_content_type WHERE app_label = 'later'"):
            citus_cluster.coordinator.execute(statement, dbname=DATABASE)


def test_the_check_names_a_sequence_behind_its_rows_and_the_command_moves_it(
        distributed: Any, citus_cluster: CitusCluster) -> None:
    coordinator = citus_cluster.coordinator
    coordinator.execute("SELECT setval(pg_get_serial_sequence('django_content_type', 'id'), 1)", dbname=DATABASE)
    check = manage(citus_cluster, "check", "--database", "default")
    assert check.returncode == 1
    assert "the sequence of django_content_type.id is behind its rows" in check.stderr
    done = manage(citus_cluster, "memory_engine_distribute")
    assert done.returncode == 0, done.stderr[-3000:]
    assert manage(citus_cluster, "check", "--database", "default").returncode == 0
    largest = coordinator.execute("SELECT max(id) FROM django_content_type", dbname=DATABASE)[0][0]
    assert coordinator.execute("SELECT last_value FROM django_content_type_id_seq", dbname=DATABASE) == [(largest,)]


def test_the_check_names_what_a_later_change_left_out_and_the_command_places_it(
        distributed: Any, citus_cluster: CitusCluster) -> None:
    coordinator = citus_cluster.coordinator
    coordinator.execute("CREATE TABLE memory_engine_later (id varchar(40), project_id varchar(40) NOT NULL "
                        "REFERENCES memory_engine_project (id), PRIMARY KEY (id, project_id))", dbname=DATABASE)
    coordinator.execute(f'ALTER DATABASE "{DATABASE}" RESET hnsw.ef_search', dbname=DATABASE)
    try:
        check = manage(citus_cluster, "check", "--database", "default")
        assert check.returncode == 1
        assert "memory_engine.E030" in check.stderr
        assert "memory_engine_later is not distributed by project_id" in check.stderr
        assert "hnsw.ef_search is not set to" in check.stderr
        done = manage(citus_cluster, "memory_engine_distribute")
        assert done.returncode == 0, done.stderr[-3000:]
        assert placed(citus_cluster)["memory_engine_later"] == "distributed"
        assert manage(citus_cluster, "check", "--database", "default").returncode == 0
    finally:
        coordinator.execute("DROP TABLE IF EXISTS memory_engine_later", dbname=DATABASE)


def test_a_table_placed_the_other_way_is_refused_not_moved(citus_cluster: CitusCluster) -> None:
    database = "memory_engine_distribute_wrong"
    migrate(citus_cluster, database)
    with citus_cluster.coordinator.connect(database) as conn:
        (foreign_key,) = conn.execute("SELECT conname FROM pg_constraint WHERE contype = 'f' "
                                      "AND conrelid = 'memory_engine_lexicalterm'::regclass").fetchone()
        conn.execute(f'ALTER TABLE memory_engine_lexicalterm DROP CONSTRAINT "{foreign_key}"')
        conn.execute("SELECT create_reference_table('memory_engine_lexicalterm')")
    done = manage(citus_cluster, "memory_engine_distribute", database=database)
    assert done.returncode == 1
    assert ("memory_engine_lexicalterm is already a reference table; the engine needs it distributed. Run "
            "SELECT undistribute_table('memory_engine_lexicalterm')") in done.stderr
    assert placed(citus_cluster, database) == {"memory_engine_lexicalterm": "reference"}


def scaling_commands() -> list[list[str]]:
    """The ``console`` block of docs/scaling.md's *Distributing the schema*, one command a line."""
    text = (ROOT / "docs" / "scaling.md").read_text()
    section = text[text.index("### Distributing the schema"):]
    block = section[section.index("```console\n") + len("```console\n"):section.index("```\n", 12)]
    return [line.split() for line in block.splitlines() if line.strip()]


def test_the_commands_of_docs_scaling_run_as_written(citus_cluster: CitusCluster) -> None:
    """docs/scaling.md's commands, on a database prepared as it says (extensions, workers added)."""
    database = "memory_engine_docs"
    citus_cluster.create_database(database)
    commands = scaling_commands()
    assert [command[:3] for command in commands] == [["python", "manage.py", "migrate"]] + [
        ["python", "manage.py", name] for name in ("memory_engine_distribute", "memory_engine_distribute", "check")]
    for command in commands:
        done = manage(citus_cluster, *command[2:], database=database)
        assert done.returncode == 0, (command, done.stderr[-3000:])
    kinds = placed(citus_cluster, database)
    assert sum(kind == "distributed" for kind in kinds.values()) == 34


def test_the_restore_point_of_docs_scaling_is_made_on_the_cluster(distributed: Any,
                                                                   citus_cluster: CitusCluster) -> None:
    """docs/scaling.md, *What Citus does not do for this app*: the ``sql`` block, run on the
    coordinator of a distributed database, names a restore point on every node."""
    text = (ROOT / "docs" / "scaling.md").read_text()
    section = text[text.index("**What Citus does not do for this app.**"):]
    statement = section[section.index("```sql\n") + len("```sql\n"):section.index("```\n", 12)].strip()
    assert statement.startswith("SELECT citus_create_restore_point(")
    [(lsn,)] = citus_cluster.coordinator.execute(statement.rstrip(";"), dbname=DATABASE)
    assert lsn is not None
