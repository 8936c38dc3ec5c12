"""What Citus refuses in memory_engine's schema, by experiment (issue 73): the real migrations applied
to the coordinator of a 3-node Citus cluster (tests/citus/cluster.py), then every shared table tried
as a reference table and every tenant table as a table distributed by ``project_id``, co-located.

Each refusal is met, recorded (Citus's own message), and then removed in the scratch database the
way the schema would have to change (a primary key or unique constraint rebuilt with
``project_id`` first, a foreign key made composite or dropped, a trigger dropped), and the table
tried again, until Citus takes it or refuses something this script does not know how to change.
The models and migrations are not changed: the scratch database is thrown away with the cluster.
The migration and the distribution are tests/citus/schema.py's (the ``citus`` group's
tests/citus/test_single_shard.py distributes the same way); this script prints what they met.

Printed: the schema's facts that matter to Citus (from the catalog, before any change), then per
table what Citus refused and what change it needs, grouped, with counts; the foreign keys added
back (as migrated, else composite); the triggers created again under
``citus.enable_unsafe_triggers``; what the bm25 indexes become on the shards; and the API's first
steps for one project on the distributed scratch schema with multi-shard statements refused (the
statement Citus refused, or what a trigger did on a shard).

    python bench/citus_inventory.py            # needs ../shared/citus (or MEMORY_ENGINE_CITUS_SOURCE)
"""

from __future__ import annotations

import os
import re
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from tests.citus.cluster import CitusCluster, running_cluster  # noqa: E402
from tests.citus.schema import DATABASE, Table, citus_error, distribute, migrate, run  # noqa: E402


def bm25_on_shards(cursor: Any, cluster: CitusCluster, tables: dict[str, Table]) -> list[str]:
    """What becomes of the bm25 indexes: their names on a worker's shards, and queries naming one."""
    lines = []
    with cluster.workers[0].connect(DATABASE) as worker, worker.cursor() as on_worker:
        on_worker.execute("SET citus.override_table_visibility = off")  # show the shards themselves
        for table in tables.values():
            for index in table.bm25:
                on_worker.execute("SELECT indexname FROM pg_indexes WHERE indexname LIKE %s ORDER BY 1",
                                  [f"{index}%"])
                names = [name for (name,) in on_worker.fetchall()]
                lines.append(f"{table.name}: index {index} is on the worker's shards as {', '.join(names[:3])}"
                             f"{', …' if len(names) > 3 else ''} ({len(names)} indexes)")
    if "memory_engine_chunk" in tables and tables["memory_engine_chunk"].bm25:
        index = tables["memory_engine_chunk"].bm25[0]
        for label, order in ((f"naming {index}", f"text <@> to_bm25query('word', '{index}')"),
                             ("naming no index", "text <@> 'word'")):
            error = run(cursor, f"SELECT id FROM memory_engine_chunk WHERE project_id = 'p1' ORDER BY {order} LIMIT 5")
            lines.append(f"a one-project chunk query {label}: {error or 'answered'}")
    return lines


def print_facts(tables: dict[str, Table], reference: list[str], distributed: list[str],
                coordinator: list[str]) -> None:
    tenant = [tables[name] for name in distributed]
    keys = [(table.name, key) for table in tenant for key in table.keys_without_project()]
    tenant_fks = [(table.name, fk) for table in tenant for fk in table.foreign_keys
                  if tables[fk.target].has_project and "project_id" not in fk.columns]
    shared_fks = [(table.name, fk) for table in tenant for fk in table.foreign_keys
                  if not tables[fk.target].has_project and fk.target != "memory_engine_project"]
    triggers = [(table.name, trigger) for table in tenant for trigger in table.triggers]
    print(f"\n== the schema as migrated: {len(tables)} tables: {len(distributed)} with project_id (to distribute), "
          f"{len(reference)} shared (reference tables), {len(coordinator)} coordinator-only")
    print(f"  coordinator-only: {', '.join(coordinator)}")
    print(f"  reference: {', '.join(reference)}")
    print(f"\n-- {len(keys)} primary keys / unique constraints / unique indexes of tenant tables without project_id "
          f"({Counter(key.kind for _t, key in keys)})")
    for name, key in keys:
        print(f"  {name}: {key.kind} {key.name} ({', '.join(key.columns)})")
    print(f"\n-- {len(tenant_fks)} foreign keys between tenant tables without project_id")
    for name, fk in tenant_fks:
        print(f"  {name}.{', '.join(fk.columns)} -> {fk.target}({', '.join(fk.target_columns)})")
    print(f"\n-- {len(shared_fks)} foreign keys from tenant tables to shared tables (need those as reference tables)")
    for name, fk in shared_fks:
        print(f"  {name}.{', '.join(fk.columns)} -> {fk.target}")
    print(f"\n-- {len(triggers)} triggers on tenant tables (what each reads or writes besides its own table)")
    for name, (trigger, function, read, _definition) in triggers:
        print(f"  {name}: {trigger} ({function}) -> {', '.join(read) or 'its own row only'}")
    bm25 = [(table.name, index) for table in tenant for index in table.bm25]
    print(f"\n-- {len(bm25)} bm25 indexes: " + ", ".join(f"{index} on {name}" for name, index in bm25))


def print_outcome(tables: dict[str, Table], order: list[str], placed: dict[str, str]) -> None:
    groups: dict[str, list[Table]] = defaultdict(list)
    for name in order:
        groups[tables[name].outcome].append(tables[name])
    for outcome in ("accepted as it is", "accepted after the changes", "refused"):
        members = groups.get(outcome, [])
        print(f"\n-- {outcome}: {len(members)}")
        for table in members:
            print(f"  {table.name} [{placed.get(table.name)}]")
            for error, change in table.refusals:
                print(f"      refused: {error}\n      change:  {change}")
    refused = Counter(re.sub(r'"[^"]*"', '"…"', error) for name in order for error, _c in tables[name].refusals)
    print("\n-- Citus's refusals by message (tables)")
    for error, count in refused.most_common():
        print(f"  {count:3d}  {error}")


def print_foreign_keys(restored: list[tuple[str, str, str, str]]) -> None:
    print(f"\n== the {len(restored)} foreign keys added back after distribution: as migrated, else composite")
    outcomes = Counter(("accepted as migrated" if as_is == "accepted" else "accepted composite"
                        if composite == "accepted" else "refused") for _t, _f, as_is, composite in restored)
    print("  " + ", ".join(f"{count} {outcome}" for outcome, count in outcomes.items()))
    for table, fk, as_is, composite in restored:
        if as_is == "accepted":
            continue
        print(f"  {table}.{fk}\n      as migrated: {as_is}\n      composite:   {composite}")


def probe_api(cluster: CitusCluster) -> list[tuple[str, str]]:
    """The API's first steps for one project on the distributed scratch schema, through Django's
    test client with ``citus.multi_task_query_log_level = 'error'`` on the connection (a statement
    that reaches several shards fails): each step's status, or the error that stopped it with the
    statement Citus refused. The key lookup is tried alone, then the requests authenticate with the
    key row read by project (past the lookup, to reach what comes after it)."""
    os.environ.update(
        DATABASE_URL=(f"postgres://postgres@127.0.0.1:{cluster.coordinator.port}/{DATABASE}"
                      "?options=-c%20citus.multi_task_query_log_level%3Derror"),
        DB_POOL_MAX_SIZE="0", DJANGO_SETTINGS_MODULE="example_project.settings",
        MEMORY_ENGINE_EMBEDDING_PROVIDER="tests.providers.HashingEmbeddingProvider")
    import logging

    import django

    django.setup()
    logging.disable(logging.CRITICAL)  # the API logs each database error with its traceback
    from django.db import connection
    from rest_framework.test import APIClient

    from memory_engine.api.authentication import ApiKeyPrincipal
    from memory_engine.models import ApiKey
    from memory_engine.services.keys import api_key_authenticate
    from tests.factories import ProjectFactory, make_key

    client = APIClient()
    state: dict[str, Any] = {}
    results: list[tuple[str, str]] = []
    last_sql: list[str] = []

    def remember(execute: Any, sql: str, params: Any, many: bool, context: Any) -> Any:
        try:
            return execute(sql, params, many, context)
        except Exception:
            text = " ".join(sql.split())
            last_sql[:] = [("… " if " FROM " in text else "") + text[text.find(" FROM ") + 1:][:360]]
            raise

    def step(label: str, action: Any) -> None:
        last_sql.clear()
        try:
            with connection.execute_wrapper(remember):
                outcome = action()
        except Exception as exc:  # noqa: BLE001 (each refusal is the finding)
            cause = exc
            while cause.__cause__ is not None:
                cause = cause.__cause__
            outcome = f"{type(cause).__name__}: {citus_error(cause)}"
        if last_sql:
            outcome = f"{outcome}\n        refused statement: {last_sql[0]}"
        if "on at least one active node" in str(outcome):
            outcome = f"{outcome}\n        the worker's log: {worker_error()}"
        results.append((label, str(outcome)))

    def worker_error() -> str:
        """The last ERROR a worker logged, with its CONTEXT line (what failed on the shard)."""
        lines = []
        for worker in cluster.workers:
            log = (cluster.root / f"{worker.name}.log").read_text(errors="replace").splitlines()
            lines += [" | ".join(line.split(" ", 3)[-1] for line in log[index:index + 2])
                      for index, line in enumerate(log) if " ERROR: " in line]
        return lines[-1][:400] if lines else "(nothing logged)"

    def project() -> str:
        state["project"] = ProjectFactory()
        state["raw"] = make_key(state["project"])
        return "created"

    def authenticate() -> str:
        return f"key of {api_key_authenticate(state['raw']).project_id}"

    def force() -> str:
        key = ApiKey.objects.get(project=state["project"], prefix=state["raw"].split("_")[1])
        client.force_authenticate(user=ApiKeyPrincipal(key), token=key)
        return "the key row read by (project_id, prefix)"

    def request(method: str, path: Any, body: Any = None) -> Any:
        def action() -> int:
            target = path() if callable(path) else path
            data = body() if callable(body) else body
            response = getattr(client, method)(target, data, format="json") if data else getattr(client, method)(target)
            if method == "post" and path == "/api/v1/memory-stores" and response.status_code == 201:
                state["store"] = response.json()["id"]
            return response.status_code
        return action

    def store() -> str:
        from tests.factories import MemoryStoreFactory

        state["store"] = MemoryStoreFactory(project=state["project"]).id
        return "created"

    def sql(statement: str, params: list[Any]) -> Any:
        with connection.cursor() as cursor:
            cursor.execute(statement, params)
            return cursor.fetchone() if cursor.description else cursor.rowcount

    def assertion() -> str:
        from django.db import transaction

        with transaction.atomic():
            sql("INSERT INTO memory_engine_memoryassertion (id, project_id, store_id, content, outcome, "
                "decision_reason, details, principal, mechanism, created_at) VALUES "
                "('probe-assertion', %s, %s, 'probe', 'declared', '', '{}', 'probe', 'api', now())",
                [state["project"].id, state.get("store")])
        feed = sql("SELECT count(*) FROM memory_engine_feedentry WHERE project_id = %s AND object_id = %s",
                   [state["project"].id, "probe-assertion"])
        return f"committed; feed entries for it: {feed[0]}"

    def memory_map() -> Any:
        return sql("INSERT INTO memory_engine_memorymap (store_id, status, points, clusters, method, live_memories, "
                   "error) VALUES (%s, 'pending', '[]', '[]', '{}', 0, '')", [state.get("store")])

    def erase_propagated() -> Any:
        from django.db import transaction

        with transaction.atomic():
            sql("SET LOCAL citus.propagate_set_commands = 'local'", [])
            sql("SET LOCAL memory_engine.ledger_erasure = 'on'", [])
            return sql("""UPDATE memory_engine_memoryassertion SET content = '[erased]', details = '{"erased": true}'
                          WHERE project_id = %s AND id = 'probe-assertion'""", [state["project"].id])

    def erase() -> Any:
        from django.db import transaction

        # the row to erase (the step above wrote it, unless its feed trigger failed), written with that trigger off
        sql("SET citus.enable_unsafe_triggers = on", [])
        sql("ALTER TABLE memory_engine_memoryassertion DISABLE TRIGGER memory_engine_feed_assertion", [])
        sql("INSERT INTO memory_engine_memoryassertion (id, project_id, store_id, content, outcome, decision_reason, "
            "details, principal, mechanism, created_at) VALUES ('probe-assertion', %s, %s, 'probe', 'declared', '', "
            "'{}', 'probe', 'api', now()) ON CONFLICT DO NOTHING", [state["project"].id, state.get("store")])
        sql("ALTER TABLE memory_engine_memoryassertion ENABLE TRIGGER memory_engine_feed_assertion", [])
        sql("RESET citus.enable_unsafe_triggers", [])
        with transaction.atomic():
            sql("SET LOCAL memory_engine.ledger_erasure = 'on'", [])
            return sql("""UPDATE memory_engine_memoryassertion SET content = '[erased]', details = '{"erased": true}'
                          WHERE project_id = %s AND id = 'probe-assertion'""", [state["project"].id])

    memory = lambda: {"memory_store_id": state.get("store"), "content": "The deploy runs on Fridays after the freeze."}  # noqa: E731
    step("create a project and an API key (ORM)", project)
    step("api_key_authenticate(raw key): the key looked up by its prefix", authenticate)
    step("(authenticate with the key row read by project)", force)
    step("POST /api/v1/memory-stores", request("post", "/api/v1/memory-stores", {"name": "facts"}))
    if "store" not in state:
        step("(the store created by the ORM instead)", store)
    step("POST /api/v1/memories", request("post", "/api/v1/memories", memory))
    step("POST /api/v1/memories (the same again: dedup)", request("post", "/api/v1/memories", memory))
    step("GET /api/v1/memories?memory_store_id=…",
         request("get", lambda: f"/api/v1/memories?memory_store_id={state.get('store')}"))
    step("POST /api/v1/knowledge/search",
         request("post", "/api/v1/knowledge/search",
                 lambda: {"query": "when does the deploy run", "memory_store_ids": [state.get("store")]}))
    step("GET /api/v1/feed", request("get", "/api/v1/feed"))
    step("an assertion inserted with its project (its feed trigger, at commit)", assertion)
    step("a memory map row inserted without project_id (its fill_project trigger)", memory_map)
    step("the assertion erased under SET LOCAL memory_engine.ledger_erasure = 'on' (its ledger guard)", erase)
    step("the same with SET LOCAL citus.propagate_set_commands = 'local' first (rows updated)", erase_propagated)
    connection.close()
    return results


def main() -> int:
    started = time.monotonic()
    with running_cluster() as cluster:
        print(f"cluster up in {time.monotonic() - started:.1f} s (build cached or done)", flush=True)
        print(f"migrated in {migrate(cluster):.1f} s", flush=True)
        with cluster.coordinator.connect(DATABASE) as conn, conn.cursor() as cursor:
            done = distribute(cursor, as_migrated=lambda migrated: print_facts(
                migrated.tables, migrated.reference, migrated.distributed, migrated.coordinator))
            tables, placed, anchor = done.tables, done.placed, done.anchor
            reference, distributed, foreign_keys = done.reference, done.distributed, done.foreign_keys
            restored, triggers = done.restored, done.triggers
            print(f"\n== reference tables (create_reference_table; the {len(foreign_keys)} foreign keys from or to "
                  "tenant tables set aside first)")
            print_outcome(tables, reference, placed)
            print(f"\n== tenant tables (create_distributed_table by project_id, co-located with {anchor})")
            print_outcome(tables, distributed, placed)
            print_foreign_keys(restored)
            print(f"\n== the {len(triggers)} triggers created again with citus.enable_unsafe_triggers = on")
            for table, trigger, outcome in triggers:
                print(f"  {table}: {trigger}: {outcome}")
            print("\n== bm25 on the shards")
            for line in bm25_on_shards(cursor, cluster, tables):
                print(f"  {line}")
        print("\n== the API on the distributed schema, one project, multi-shard statements refused")
        for label, outcome in probe_api(cluster):
            print(f"  {label}: {outcome}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
