"""Per-project corpus statistics of the lexical channel, kept by the database itself.

BM25 scores a row with three corpus figures: how many rows there are (N), their average length,
and how many rows hold each query term (df). pg_textsearch keeps them per index, and an index
spans every project: one tenant's writes moved another tenant's scores and ranks, and a tenant
could watch its own scores to learn how common a word is in other tenants' data.

Here the figures are per project and per *part* (memory contents, live chunks, staged chunks),
in ``memory_engine_lexicalstatistics`` (N and the summed lengths) and
``memory_engine_lexicalterm`` (df per lexeme). Statement triggers on the content and chunk
tables keep both current in the transaction that inserts, deletes or moves the rows, whatever
wrote them (the write funnel, batches, ingestion, replay's swap, erasure, a cascade, raw SQL).
The search (selectors/search/sql.py) takes its candidates from the index and scores them with
these figures only.

A row's terms are the lexemes of ``to_tsvector(config, text)`` with the config the lexical
indexes were built with (KNOWLEDGE_TEXT_SEARCH_CONFIG, baked into the trigger function);
its length is the number of its tokens. :func:`install_lexical_statistics` (migration 0028,
``manage.py memory_engine_rebuild_lexical``) creates the functions and triggers and counts
every existing row afresh.

Concurrency: a transaction locks its project's statistics row before its term rows, and the
term rows in lexeme order, so two writers of one project queue instead of deadlocking; a row
that goes away only decrements (an update, never an insert), so a project being deleted never
gets its rows back.
"""

from __future__ import annotations

from typing import Any

from django.db import DEFAULT_DB_ALIAS, connections

from memory_engine.conf import engine_settings
from memory_engine.lexical import valid_config_name

STATISTICS_TABLE = "memory_engine_lexicalstatistics"
TERM_TABLE = "memory_engine_lexicalterm"
#: table -> the SQL expression of a row's part (``r``: the row)
PARTS = {
    "memory_engine_memorycontent": "'content'::text",
    "memory_engine_chunk": "CASE WHEN r.generation_id IS NULL THEN 'chunk' ELSE 'staged' END::text",
}
APPLY_FUNCTION = "memory_engine_lexical_apply"
TRIGGER_FUNCTION = "memory_engine_lexical_count"
TRIGGER = "me_lexical_statistics"


def _apply_function(config: str) -> str:
    """Adds ``sign`` (+1 or -1) times each row's figures to its project and part; the rows come
    as parallel arrays (project, part, text), each text tokenized once."""
    length = "(SELECT sum(coalesce(array_length(l.positions, 1), 1)) FROM unnest(v) l)"
    rows = "unnest(projects, parts, vectors) AS r(project_id, part, v) WHERE r.project_id IS NOT NULL"
    return f"""
CREATE OR REPLACE FUNCTION {APPLY_FUNCTION}(projects text[], parts text[], texts text[], sign integer)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    vectors tsvector[] := ARRAY(SELECT to_tsvector('{config}'::regconfig, coalesce(t, ''))
                                FROM unnest(texts) WITH ORDINALITY AS u(t, i) ORDER BY i);
    gone record;
    terms text[];
    counts bigint[];
BEGIN
    IF sign > 0 THEN
        INSERT INTO {STATISTICS_TABLE} AS s (project_id, part, documents, tokens)
        SELECT project_id, part, count(*), coalesce(sum({length}), 0)
        FROM {rows} GROUP BY project_id, part ORDER BY project_id, part
        ON CONFLICT (project_id, part) DO UPDATE
            SET documents = s.documents + EXCLUDED.documents, tokens = s.tokens + EXCLUDED.tokens;
        INSERT INTO {TERM_TABLE} AS s (project_id, part, term, documents)
        SELECT r.project_id, r.part, l.lexeme, count(*)
        FROM {rows.replace(' WHERE', ' CROSS JOIN LATERAL unnest(r.v) l WHERE')} GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
        ON CONFLICT (project_id, part, term) DO UPDATE SET documents = s.documents + EXCLUDED.documents;
    ELSE
        -- per project and part (one, for a write): its figures, then its terms' as two arrays
        -- joined to the term rows, each UPDATE naming the project: on a Citus cluster a statement
        -- on the project's own shard, which a trigger on a shard may run (an UPDATE joined to a
        -- grouping of these rows is planned as a distributed one, refused there)
        FOR gone IN SELECT project_id, part, count(*) AS documents, coalesce(sum({length}), 0) AS tokens
                    FROM {rows} GROUP BY project_id, part ORDER BY project_id, part LOOP
            UPDATE {STATISTICS_TABLE} s SET documents = s.documents - gone.documents, tokens = s.tokens - gone.tokens
            WHERE s.project_id = gone.project_id AND s.part = gone.part;
            SELECT array_agg(t.term ORDER BY t.term), array_agg(t.documents ORDER BY t.term) INTO terms, counts
            FROM (SELECT l.lexeme AS term, count(*) AS documents
                  FROM {rows.replace(' WHERE', ' CROSS JOIN LATERAL unnest(r.v) l WHERE')}
                    AND r.project_id = gone.project_id AND r.part = gone.part GROUP BY 1) t;
            UPDATE {TERM_TABLE} s SET documents = s.documents - d.documents
            FROM unnest(terms, counts) AS d(term, documents)
            WHERE s.project_id = gone.project_id AND s.part = gone.part AND s.term = d.term;
        END LOOP;
    END IF;
END $$"""


def _trigger_function(table: str) -> str:
    """The statement trigger of one table: inserted rows count, deleted rows uncount, an update
    that changes a row's part or text moves it."""
    part = PARTS[table]
    rows = f"array_agg(r.project_id::text), array_agg({part}), array_agg(r.text)"
    return f"""
CREATE OR REPLACE FUNCTION {TRIGGER_FUNCTION}_{table.removeprefix('memory_engine_')}() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        PERFORM {APPLY_FUNCTION}({rows}, 1) FROM arrived r HAVING count(*) > 0;
    ELSIF TG_OP = 'DELETE' THEN
        PERFORM {APPLY_FUNCTION}({rows}, -1) FROM gone r HAVING count(*) > 0;
    ELSE
        PERFORM {APPLY_FUNCTION}({rows}, -1) FROM gone r JOIN arrived n ON n.id = r.id
            WHERE {part} IS DISTINCT FROM {part.replace('r.', 'n.')} OR r.text IS DISTINCT FROM n.text
            HAVING count(*) > 0;
        PERFORM {APPLY_FUNCTION}({rows}, 1) FROM arrived r JOIN gone o ON o.id = r.id
            WHERE {part} IS DISTINCT FROM {part.replace('r.', 'o.')} OR r.text IS DISTINCT FROM o.text
            HAVING count(*) > 0;
    END IF;
    RETURN NULL;
END $$"""


def _triggers(table: str) -> list[str]:
    function = f"{TRIGGER_FUNCTION}_{table.removeprefix('memory_engine_')}()"
    return [
        f'DROP TRIGGER IF EXISTS "{TRIGGER}_insert" ON {table}',
        f'DROP TRIGGER IF EXISTS "{TRIGGER}_delete" ON {table}',
        f'DROP TRIGGER IF EXISTS "{TRIGGER}_update" ON {table}',
        f'CREATE TRIGGER "{TRIGGER}_insert" AFTER INSERT ON {table} REFERENCING NEW TABLE AS arrived '
        f"FOR EACH STATEMENT EXECUTE FUNCTION {function}",
        f'CREATE TRIGGER "{TRIGGER}_delete" AFTER DELETE ON {table} REFERENCING OLD TABLE AS gone '
        f"FOR EACH STATEMENT EXECUTE FUNCTION {function}",
        f'CREATE TRIGGER "{TRIGGER}_update" AFTER UPDATE ON {table} REFERENCING OLD TABLE AS gone '
        f"NEW TABLE AS arrived FOR EACH STATEMENT EXECUTE FUNCTION {function}",
    ]


def install_lexical_statistics(*, config: str | None = None, using: str = DEFAULT_DB_ALIAS) -> None:
    """(Re)create the functions and triggers with ``config`` and count every row afresh."""
    config = valid_config_name(config or engine_settings.KNOWLEDGE_TEXT_SEARCH_CONFIG)
    with connections[using].cursor() as cursor:
        cursor.execute(_apply_function(config))
        for table in PARTS:
            cursor.execute(_trigger_function(table))
            for statement in _triggers(table):
                cursor.execute(statement)
        recount(cursor, config)


def replace_apply_function(*, config: str | None = None, using: str = DEFAULT_DB_ALIAS) -> None:
    """The function the triggers call, made again (nothing is counted afresh)."""
    config = valid_config_name(config or engine_settings.KNOWLEDGE_TEXT_SEARCH_CONFIG)
    with connections[using].cursor() as cursor:
        cursor.execute(_apply_function(config))


def recount(cursor: Any, config: str) -> None:
    """Every project's figures counted again from its rows (the config named as in the triggers)."""
    cursor.execute(f"DELETE FROM {TERM_TABLE}")
    cursor.execute(f"DELETE FROM {STATISTICS_TABLE}")
    for table, part in PARTS.items():
        cursor.execute(f"""
            WITH r AS (SELECT r.project_id, {part} AS part, to_tsvector('{config}'::regconfig, r.text) AS v
                       FROM {table} r WHERE r.project_id IS NOT NULL),
            s AS (INSERT INTO {STATISTICS_TABLE} (project_id, part, documents, tokens)
                  SELECT project_id, part, count(*),
                         coalesce(sum((SELECT sum(coalesce(array_length(l.positions, 1), 1)) FROM unnest(v) l)), 0)
                  FROM r GROUP BY project_id, part)
            INSERT INTO {TERM_TABLE} (project_id, part, term, documents)
            SELECT r.project_id, r.part, l.lexeme, count(*) FROM r, unnest(r.v) l GROUP BY 1, 2, 3""")


def uninstall_lexical_statistics(using: str = DEFAULT_DB_ALIAS) -> None:
    with connections[using].cursor() as cursor:
        for table in PARTS:
            for statement in _triggers(table)[:3]:
                cursor.execute(statement)
            cursor.execute(f"DROP FUNCTION IF EXISTS {TRIGGER_FUNCTION}_{table.removeprefix('memory_engine_')}()")
        cursor.execute(f"DROP FUNCTION IF EXISTS {APPLY_FUNCTION}(text[], text[], text[], integer)")
