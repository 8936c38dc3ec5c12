"""The SQL of a search, built from a resolved scope; nothing here touches a connection.

One statement ranks a query (:func:`build_search_sql`): per source a vector top-k (cosine over
pgvector) and a lexical top-k, scope filters inside each ranked query, all candidate lists as
CTEs merged into one row per (source, id) with its display fields. Its columns, and those of
the ordered read without a query (:func:`ordered_read_sql`), are named after the fields of
memory_engine.selectors.search.rows.

Parameters are named (``%(qvec)s``, ``%(lex_k)s``, ...): the scope's come from
``Scope.params()``, the others from the caller. Only table and index names, which are
constants, and the validated text search config are inlined.
"""

from __future__ import annotations

from memory_engine.lexical import BM25, INDEXES, STAGED_CHUNK_BM25, TSVECTOR, tsvector_expression
from memory_engine.models import (
    Chunk,
    Document,
    DocumentVersion,
    Entity,
    EntityEdge,
    Memory,
    MemoryContent,
    MemoryStore,
)
from memory_engine.models.lexical import LexicalPart, LexicalStatistics, LexicalTerm
from memory_engine.models.memories import LIVE_MEMORY_SQL, SourceType, Tier

from .boosts import EVENT_KINDS, version_authority_sql
from .results import DOCUMENT, MEMORY, USER_FOR_AGENT
from .rows import DisplayRow
from .scope import Scope

MEM = Memory._meta.db_table
CONTENT = MemoryContent._meta.db_table
STORE = MemoryStore._meta.db_table
CHUNK = Chunk._meta.db_table
DOC = Document._meta.db_table
VERSION = DocumentVersion._meta.db_table
EDGE = EntityEdge._meta.db_table
LEXICAL_STATISTICS = LexicalStatistics._meta.db_table
LEXICAL_TERM = LexicalTerm._meta.db_table
ENTITY = Entity._meta.db_table
#: source -> its lexical index names (memory_engine.lexical builds them).
BM25_INDEX = {MEMORY: INDEXES[CONTENT][0], DOCUMENT: INDEXES[CHUNK][0]}
GIN_INDEX = {MEMORY: INDEXES[CONTENT][1], DOCUMENT: INDEXES[CHUNK][1]}
#: The CTE name prefix of each source's candidate lists.
SHORT = {MEMORY: "m", DOCUMENT: "c"}

#: pgvector 0.8 iterative scan for the current transaction: a filtered HNSW scan fetches more
#: candidates until k rows pass the scope (or hnsw.max_scan_tuples were visited).
HNSW_SCAN_SQL = (
    "SELECT set_config('hnsw.ef_search', %(ef_search)s::text, true),"
    " set_config('hnsw.iterative_scan', %(iterative_scan)s, true),"
    " set_config('hnsw.max_scan_tuples', %(max_scan_tuples)s::text, true)"
)


def in_project(*aliases: str) -> str:
    """Each of ``aliases`` (rows of tables that carry ``project_id``) is the searched project's.
    Redundant on one PostgreSQL, where a scope's stores and documents are the project's already;
    on a distributed one (docs/scaling.md, Citus) a filter on the distribution column of every
    table read is what routes the statement to the one node holding the project. On the memory,
    content, chunk and version tables the column is unindexed (TenantProjectField): there it
    takes no index's place."""
    return " AND ".join(f"{alias}.project_id = %(project)s" for alias in aliases)


def memory_where(scope: Scope, stores: str = "m.store_id") -> str:
    """The scope filters of memories (``m``: the memory, ``s``: its store): live memories of the
    scope's stores (``stores``: the column that says the store), both the project's; with a
    facet, that facet's and the cross-cutting ones (no facet)."""
    where = f"{stores} = ANY(%(store_ids)s) AND {in_project('m', 's')} AND {LIVE_MEMORY_SQL}"
    if scope.facet is not None:
        where += " AND (m.facet IS NULL OR m.facet = %(facet)s)"
    if scope.tags is not None:
        where += " AND (m.tags @> %(tags)s OR s.tags @> %(tags)s)"
    if scope.access_tags is not None:  # a key with grants: its stores only (docs/security.md)
        where += " AND s.access_tags && %(access_tags)s::varchar[]"
    if scope.provenance is not None:
        where += " AND m.provenance = ANY(%(provenance)s)"
    if scope.lineage is not None:
        where += " AND m.lineage = ANY(%(lineage)s)"
    return where + _mentions_where(scope, "memory_id", "m.id")


def _mentions_where(scope: Scope, column: str, row: str) -> str:
    """The entity filters (docs/entities.md): ``row`` (a memory or chunk id, the edge's
    ``column``) is mentioned, through a valid edge, by one of ``%(entity_ids)s`` and by an entity
    of one of ``%(kinds)s``."""
    where = ""
    if scope.entity_ids is not None:
        where += (f" AND EXISTS (SELECT 1 FROM {EDGE} ee WHERE ee.{column} = {row}"
                  " AND ee.invalid_at IS NULL AND ee.entity_id = ANY(%(entity_ids)s))")
    if scope.kinds is not None:
        where += (f" AND EXISTS (SELECT 1 FROM {EDGE} ke JOIN {ENTITY} ken ON ken.id = ke.entity_id"
                  f" WHERE ke.{column} = {row} AND ke.invalid_at IS NULL AND ken.kind = ANY(%(kinds)s))")
    return where


def tier_sql(memory: str, store: str) -> str:
    """A memory's tier: its store's, or user_for_agent for a user-tier memory written by or for
    the actor's agent (``%(actor_agent)s``; NULL without an actor)."""
    return (f"CASE WHEN {store}.tier = '{Tier.USER.value}' AND {memory}.agent_id = %(actor_agent)s "
            f"THEN '{USER_FOR_AGENT}' ELSE {store}.tier END")


def document_where(scope: Scope) -> str:
    """The scope filters of chunks (``x``: the chunk, ``d``: its document): live chunks
    (``generation_id IS NULL``: a column of the chunk row the HNSW and bm25 scans filter as
    they go, no join), or a staged generation's instead."""
    live = "x.generation_id IS NULL" if scope.generation_id is None else "x.generation_id = %(generation)s"
    where = f"{live} AND {in_project('d', 'x')}"
    alternatives = []
    if scope.document_ids:
        alternatives.append("d.id = ANY(%(doc_ids)s)")
    if scope.path_patterns:
        alternatives.append("d.path LIKE ANY(%(path_patterns)s)")
    if alternatives:
        where += " AND (" + " OR ".join(alternatives) + ")"
    if scope.tags is not None:
        where += " AND d.tags @> %(tags)s"
    if not scope.include_deprecated:
        where += " AND d.deprecated_at IS NULL"
    if scope.access_tags is not None:  # a key with grants: its documents only (docs/security.md)
        where += " AND d.access_tags && %(access_tags)s::varchar[]"
    origin = [*(["v.provenance = ANY(%(provenance)s)"] if scope.provenance is not None else []),
              *(["v.source_class = ANY(%(lineage)s)"] if scope.lineage is not None else [])]
    if origin:  # a chunk's provenance and lineage are its version's
        where += (f" AND EXISTS (SELECT 1 FROM {VERSION} v WHERE v.id = x.version_id AND {in_project('v')}"
                  f" AND {' AND '.join(origin)})")
    return where + _mentions_where(scope, "chunk_id", "x.id")


def _bm25_score(source: str, scope: Scope) -> str:
    """The pg_textsearch score of ``x.text`` (negative BM25: lower is better), with the statistics
    of the index holding the rows searched: a staged generation's chunks have their own."""
    index = STAGED_CHUNK_BM25 if source == DOCUMENT and scope.generation_id is not None else BM25_INDEX[source]
    return f"(x.text <@> to_bm25query(%(qtext)s, '{index}'))"


def _query_terms_cte(config: str) -> str:
    """The query's terms (``qterms``): its lexemes in the config (stop words dropped)."""
    return (f"qterms AS (SELECT DISTINCT l AS term FROM unnest(tsvector_to_array("
            f"{tsvector_expression(config, '%(qtext)s')})) AS l)")


#: A query term selects candidates on the tsvector fallback unless it is in more than this many of
#: the project's rows (content rows or chunks) and in more than KNOWLEDGE_BM25_MAX_DF of them:
#: below it, even a term in every row selects few rows.
COMMON_TERM_MIN_ROWS = 1000


def _fallback_term_ctes() -> list[str]:
    """tsvector fallback: the query terms' shares of the project's rows from its own lexical
    statistics (``lex_stats``: the larger share of its content rows and of its chunks, for terms
    in more than COMMON_TERM_MIN_ROWS of them), and the OR-query that selects candidates (terms
    in more than KNOWLEDGE_BM25_MAX_DF of the rows are left out of it: they would select most of
    a large project; BM25 still scores them). Only the project's rows are read: no other
    tenant's data decides which terms select, and on a distributed PostgreSQL the statement
    stays on the project's node."""
    parts = f"('{LexicalPart.CONTENT.value}', '{LexicalPart.CHUNK.value}')"
    return [
        f"""lex_stats AS (
        SELECT lt.term AS e, max(lt.documents::float8 / n.documents) AS f
        FROM {LEXICAL_TERM} lt
        JOIN (SELECT part, greatest(sum(documents), 1)::float8 AS documents FROM {LEXICAL_STATISTICS}
              WHERE project_id = %(project)s AND part IN {parts} GROUP BY part) n ON n.part = lt.part
        WHERE lt.project_id = %(project)s AND lt.part IN {parts} AND lt.documents > {COMMON_TERM_MIN_ROWS}
          AND lt.term IN (SELECT term FROM qterms)
        GROUP BY lt.term)""",
        """tsq AS (
        SELECT coalesce(nullif(string_agg(quote_literal(term), ' | ') FILTER (WHERE df <= %(bm25_max_df)s), ''),
                        string_agg(quote_literal(term), ' | '), '')::tsquery AS q
        FROM (SELECT t.term, coalesce(max(st.f), 0) AS df FROM qterms t
              LEFT JOIN lex_stats st ON st.e = t.term GROUP BY t.term) terms)""",
    ]


def _memory_scope(scope: Scope, exact: bool) -> str:
    """The scope filters of a memory branch (``x``: the content row, ``m``: its memory), the
    store filtered on one table only.

    A memory's content row is always in its own store, so either table can say the store. A
    large scope filters the content rows: the HNSW and bm25 scans of the content table filter
    them as they go, and each row found reads its memories by key. A small scope (``exact``)
    filters the memories, and each reads its content row by key. Filtering both would let the
    planner join the two tables on the store alone, and for a store its statistics have not
    seen yet (estimated at one row) it does: every memory compared with every content row,
    quadratic in the store's size.
    """
    where = memory_where(scope) if exact else memory_where(scope, stores="x.store_id")
    return f"{where} AND {in_project('x')}"


def _vector_cte(source: str, scope: Scope, exact: bool) -> str:
    """Top-k by cosine distance: through the HNSW index (iterative scan: it keeps going
    until k rows pass the scope), or (exact) a scan of the scope that computes each
    distance once (``OFFSET 0`` keeps the subquery, and so the index, out of the ORDER BY)."""
    if source == MEMORY:
        inner = f"""
        SELECT m.id AS id, x.embedding <=> %(qvec)s::vector AS dist
        FROM {CONTENT} x
        JOIN {MEM} m ON m.content_id = x.id
        JOIN {STORE} s ON s.id = m.store_id
        WHERE x.embedding IS NOT NULL AND {_memory_scope(scope, exact)}"""
    else:
        inner = f"""
        SELECT x.id AS id, x.embedding <=> %(qvec)s::vector AS dist
        FROM {CHUNK} x
        JOIN {DOC} d ON d.id = x.document_id
        WHERE x.embedding IS NOT NULL AND {document_where(scope)}"""
    if exact:
        return f"SELECT id, dist FROM ({inner} OFFSET 0) e ORDER BY dist, id LIMIT %(vec_k)s"
    return f"{inner}\n        ORDER BY x.embedding <=> %(qvec)s::vector LIMIT %(vec_k)s"


def _source_body(source: str, scope: Scope, match: str | None, exact: bool) -> tuple[str, str]:
    """(primary key, FROM ... WHERE ...) of one source's lexical query, scope filters inside;
    ``match`` (None: every row of the scope) selects the rows that match the query."""
    match = f"{match} AND " if match else ""
    if source == MEMORY:
        return "m.id", f"""FROM {CONTENT} x
        JOIN {MEM} m ON m.content_id = x.id
        JOIN {STORE} s ON s.id = m.store_id
        WHERE {match}{_memory_scope(scope, exact)}"""
    return "x.id", f"""FROM {CHUNK} x
        JOIN {DOC} d ON d.id = x.document_id
        WHERE {match}{document_where(scope)}"""


def _lexical_ctes(source: str, scope: Scope, *, with_vector: bool, backend: str, config: str,
                  exact: bool) -> list[str]:
    """The lexical top-k of one source (``{short}_lex``: id, lex, dist); higher lex is better.

    Candidates (``{short}_pre``: id, tsvector, dist). bm25: pg_textsearch's index scan in score
    order, the scope filtered inside the same query, the top lex_k; a
    small scope of memories (``exact``) is read whole instead (``OFFSET 0``: each row
    tokenized once). tsvector: rows matching any term, the top KNOWLEDGE_BM25_CANDIDATES by
    ts_rank_cd. Either way the candidates are scored by Okapi BM25 with the statistics of the
    searched project only (memory_engine.lexical_statistics), so no other project's rows move
    a score or a rank.
    """
    short = SHORT[source]
    exact = exact and source == MEMORY
    dist = "x.embedding <=> %(qvec)s::vector" if with_vector else "NULL::float8"
    tsv = tsvector_expression(config, "x.text")
    if backend == BM25:
        score = _bm25_score(source, scope)
        if exact:
            pk, body = _source_body(source, scope, None, exact)
            pre = f"SELECT {pk} AS id, {tsv} AS v, {dist} AS dist {body} OFFSET 0"
        else:
            pk, body = _source_body(source, scope, f"{score} < 0", exact)
            pre = (f"SELECT id, {tsvector_expression(config, 'o.text')} AS v, dist FROM ("
                   f"SELECT {pk} AS id, x.text AS text, {dist} AS dist {body} "
                   f"ORDER BY {score} LIMIT %(lex_k)s) o")
    else:
        pk, body = _source_body(source, scope, f"{tsv} @@ (SELECT q FROM tsq)", exact)
        pre = (f"SELECT {pk} AS id, {tsv} AS v, {dist} AS dist {body} "
               f"ORDER BY ts_rank_cd({tsv}, (SELECT q FROM tsq), 1) DESC, {pk} LIMIT %(bm25_candidates)s")
    return [f"{short}_pre AS ({pre})", *_bm25_ctes(short, _lexical_part(source, scope))]


def _lexical_part(source: str, scope: Scope) -> str:
    """The statistics a source's rows are scored with (memory_engine.models.lexical.LexicalPart)."""
    if source == MEMORY:
        return LexicalPart.CONTENT.value
    return LexicalPart.CHUNK.value if scope.generation_id is None else LexicalPart.STAGED.value


def _bm25_ctes(short: str, part: str) -> list[str]:
    """Okapi BM25 of ``{short}_pre``'s rows with the project's figures (``{short}_w``: N, the
    average length, the query's terms and their IDFs as two arrays in one row); the top lex_k
    (``{short}_lex``). A row's terms are matched against the array, joined to nothing: the
    plan stays one pass over the candidates."""
    tf = "coalesce(array_length(u.positions, 1), 1)"
    idf = "w.idfs[array_position(w.terms, u.lexeme)]"
    df = "least(t.df, st.n)"
    return [
        f"""{short}_w AS (
        SELECT st.n, st.avgdl, array_agg(t.term ORDER BY t.term) AS terms,
               array_agg(ln(1 + (st.n - {df} + 0.5) / ({df} + 0.5)) ORDER BY t.term) AS idfs
        FROM (SELECT greatest(coalesce(sum(documents), 0), 1)::float8 AS n,
                     greatest(coalesce(sum(tokens)::float8 / nullif(sum(documents), 0), 1), 1) AS avgdl
              FROM {LEXICAL_STATISTICS} WHERE project_id = %(project)s AND part = '{part}') st
        CROSS JOIN (SELECT q.term, coalesce((SELECT lt.documents FROM {LEXICAL_TERM} lt
                                             WHERE lt.project_id = %(project)s AND lt.part = '{part}'
                                               AND lt.term = q.term), 0) AS df
                    FROM qterms q) t
        GROUP BY st.n, st.avgdl)""",
        f"""{short}_lex AS (
        SELECT p.id, sum({idf} * {tf} * (%(bm25_k1)s + 1)
                   / ({tf} + %(bm25_k1)s * (1 - %(bm25_b)s + %(bm25_b)s * p.len / w.avgdl))) AS lex,
               min(p.dist) AS dist
        FROM {short}_w w
        CROSS JOIN LATERAL (
            SELECT q.id, q.v, q.dist,
                   (SELECT sum(coalesce(array_length(l.positions, 1), 1)) FROM unnest(q.v) l) AS len
            FROM {short}_pre q WHERE tsvector_to_array(q.v) && w.terms) p
        CROSS JOIN LATERAL (SELECT * FROM unnest(p.v) l WHERE l.lexeme = ANY(w.terms) OFFSET 0) u
        GROUP BY p.id ORDER BY lex DESC, p.id LIMIT %(lex_k)s)""",
    ]


def _graph_cte(scope: Scope, vector: bool) -> str:
    """The graph channel (``m_graph``: id, g, dist): live memories of the scope that mention the
    scope's graph entities, by the summed weight of those they mention, then by cosine distance;
    at most ``%(graph_k)s``."""
    dist = "min(x.embedding <=> %(qvec)s::vector)" if vector else "NULL::float8"
    return f"""m_graph AS (
        SELECT m.id AS id, sum(w.weight) AS g, {dist} AS dist
        FROM unnest(%(graph_entities)s::varchar[], %(graph_weights)s::float8[]) AS w(entity_id, weight)
        JOIN {EDGE} ee ON ee.entity_id = w.entity_id AND ee.memory_id IS NOT NULL
        JOIN {MEM} m ON m.id = ee.memory_id
        JOIN {STORE} s ON s.id = m.store_id
        JOIN {CONTENT} x ON x.id = m.content_id
        WHERE {memory_where(scope)} AND {in_project('x')}
        GROUP BY m.id ORDER BY g DESC, dist, m.id LIMIT %(graph_k)s)"""


def build_search_sql(scope: Scope, *, vector: bool, lexical: str | None, exact: dict[str, bool],
                     config: str = "english") -> str:
    """One statement: up to four candidate lists, ranked per channel, with display fields.

    ``lexical`` is the backend (bm25 | tsvector) or None to leave the channel out; ``exact``
    says per source whether its scope is small (at most SEARCH_EXACT_SCAN_MAX rows): the
    vector channel then scans the scope instead of the HNSW index, and memories are read
    from the scope's memory rows, their content rows by key (bm25: scored row by row).
    The columns are the fields of ``CandidateRow``; a memory's ``tier`` is its store's, or
    user_for_agent for a user-tier memory the actor's agent wrote (``%(actor_agent)s``).
    """
    ctes: list[str] = []
    vec_parts: list[str] = []
    lex_parts: list[str] = []
    if lexical:
        ctes.append(_query_terms_cte(config))
    if lexical == TSVECTOR:
        ctes.extend(_fallback_term_ctes())
    for source in scope.sources:
        short = SHORT[source]
        if vector:
            ctes.append(f"{short}_vec AS ({_vector_cte(source, scope, exact[source])})")
            vec_parts.append(f"SELECT '{source}'::text AS src, id, dist FROM {short}_vec")
        if lexical:
            ctes.extend(_lexical_ctes(source, scope, with_vector=vector, backend=lexical, config=config,
                                      exact=exact[source]))
            lex_parts.append(f"SELECT '{source}'::text AS src, id, lex, dist FROM {short}_lex")
    parts = [f"SELECT src, id, dist, true AS v, NULL::float8 AS lex, NULL::float8 AS g FROM ({p}) a"
             for p in vec_parts]
    parts += [f"SELECT src, id, dist, false AS v, lex, NULL::float8 AS g FROM ({p}) b" for p in lex_parts]
    if scope.graph_entities and MEMORY in scope.sources:
        ctes.append(_graph_cte(scope, vector))
        parts.append(f"SELECT '{MEMORY}'::text AS src, id, dist, false AS v, NULL::float8 AS lex, g FROM m_graph")
    ctes.append(f"""cand AS (
        SELECT src, id, min(dist) AS dist, bool_or(v) AS v, max(lex) AS lex, max(g) AS g
        FROM ({' UNION ALL '.join(parts)}) u GROUP BY src, id)""")
    return "WITH " + ",\n".join(ctes) + _candidate_select()


def _candidate_select() -> str:
    """The columns of ``CandidateRow`` for each row of the CTE ``cand`` (src, id, dist, v, lex,
    g): its display fields joined by key."""
    return f"""
    SELECT cand.src AS source, cand.id AS id, cand.dist AS dist, cand.v AS from_vector, cand.lex AS lex,
           cand.g AS graph, coalesce(mm.source_type = '{SourceType.CONVERSATION.value}', false) AS turn,
           coalesce(mc.text, ch.text) AS text, coalesce(mm.tags, d.tags) AS tags,
           d.id AS document_id, d.path AS document_path, d.title AS document_title,
           ch.page AS page, ch.chunk_index AS chunk_index,
           ms.id AS memory_store_id, ms.name AS memory_store_name, mm.created_at AS created_at,
           {tier_sql("mm", "ms")} AS tier, mm.title AS title, ms.recency_half_life_days AS store_half_life,
           coalesce(mm.provenance, dv.provenance) AS provenance, coalesce(mm.lineage, dv.source_class) AS lineage,
           CASE WHEN cand.src = '{MEMORY}' THEN least(1.0, greatest(0.0, mm.confidence))::float8
                ELSE {version_authority_sql("dv")} END AS authority,
           CASE WHEN cand.src = '{MEMORY}' THEN
                    CASE WHEN mm.kind = ANY(ARRAY[{", ".join(f"'{k}'" for k in EVENT_KINDS)}]) THEN mm.created_at END
                ELSE dv.occurred_at END AS event_at
    FROM cand
    LEFT JOIN {MEM} mm ON cand.src = '{MEMORY}' AND mm.id = cand.id AND {in_project('mm')}
    LEFT JOIN {CONTENT} mc ON mc.id = mm.content_id AND {in_project('mc')}
    LEFT JOIN {STORE} ms ON ms.id = mm.store_id AND {in_project('ms')}
    LEFT JOIN {CHUNK} ch ON cand.src = '{DOCUMENT}' AND ch.id = cand.id AND {in_project('ch')}
    LEFT JOIN {DOC} d ON d.id = ch.document_id AND {in_project('d')}
    LEFT JOIN {VERSION} dv ON dv.id = ch.version_id AND {in_project('dv')}"""


def context_sql(scope: Scope, *, vector: bool) -> str:
    """The neighbouring turns of the memories ``%(context_of)s``: for each of them written as a
    conversation turn, up to ``%(context_turns)s`` live memories of the scope just before it and
    as many just after it among the turns of its conversation (its store and ``conversation_id``,
    or turns without one; by created_at, then id), read by the ``me_memory_turns`` index. The
    columns are ``ContextRow``'s: a ``CandidateRow`` of the turn (its own cosine distance; no
    channel ranked it) and the ``origins`` it neighbours; how far apart in time is the caller's
    to judge."""
    conversation = SourceType.CONVERSATION.value
    thread = "coalesce({}.metadata->>'conversation_id', '')"

    # The index's columns, equal or in order: the scan reads the rows it returns. The scope's
    # store filter is on the hit's store (its neighbours' is the same).
    def near(before: bool) -> str:
        side, order = ("<", "DESC") if before else (">", "")
        return f"""(SELECT m.id FROM {MEM} m JOIN {STORE} s ON s.id = m.store_id
            WHERE m.store_id = o.store_id AND m.source_type = '{conversation}'
              AND {thread.format("m")} = {thread.format("o")}
              AND (m.created_at, m.id) {side} (o.created_at, o.id)
              AND {memory_where(scope, stores="o.store_id")}
            ORDER BY m.store_id {order}, {thread.format("m")} {order}, m.created_at {order}, m.id {order}
            LIMIT %(context_turns)s)"""

    dist = "x.embedding <=> %(qvec)s::vector" if vector else "NULL::float8"
    events = ", ".join(f"'{kind}'" for kind in EVENT_KINDS)
    # A memory's columns only (no chunk, document or version to join): planned in a third of the time.
    return f"""WITH near AS (
        SELECT o.id AS origin, n.id AS id FROM {MEM} o
        CROSS JOIN LATERAL ({near(True)} UNION ALL {near(False)}) n
        WHERE o.id = ANY(%(context_of)s) AND {in_project('o')} AND o.source_type = '{conversation}')
    SELECT '{MEMORY}'::text AS source, m.id AS id, {dist} AS dist, false AS from_vector, NULL::float8 AS lex,
           NULL::float8 AS graph, n.origins AS origins, true AS turn, x.text AS text, m.tags AS tags,
           NULL::varchar AS document_id, NULL::varchar AS document_path, NULL::varchar AS document_title,
           NULL::int AS page, NULL::int AS chunk_index, s.id AS memory_store_id, s.name AS memory_store_name,
           m.created_at AS created_at, {tier_sql("m", "s")} AS tier, m.title AS title,
           s.recency_half_life_days AS store_half_life, m.provenance AS provenance, m.lineage AS lineage,
           least(1.0, greatest(0.0, m.confidence))::float8 AS authority,
           CASE WHEN m.kind = ANY(ARRAY[{events}]) THEN m.created_at END AS event_at
    FROM (SELECT id, array_agg(DISTINCT origin ORDER BY origin) AS origins FROM near GROUP BY id) n
    JOIN {MEM} m ON m.id = n.id AND {in_project('m')}
    JOIN {CONTENT} x ON x.id = m.content_id AND {in_project('x')}
    JOIN {STORE} s ON s.id = m.store_id AND {in_project('s')}"""


def scope_sizes_sql(scope: Scope) -> str | None:
    """Rows each source's scope holds, counted up to ``%(cap)s`` (index-only scans); one
    column per source, named after it. None when the scope has no source."""
    parts = []
    if scope.store_ids is not None:
        parts.append(f"""(SELECT count(*) FROM (SELECT 1 FROM {MEM} m JOIN {STORE} s ON s.id = m.store_id
                      WHERE {memory_where(scope)} LIMIT %(cap)s) a) AS {MEMORY}""")
    if scope.search_documents:
        parts.append(f"""(SELECT count(*) FROM (SELECT 1 FROM {CHUNK} x JOIN {DOC} d ON d.id = x.document_id
                      WHERE {document_where(scope)} LIMIT %(cap)s) b) AS {DOCUMENT}""")
    return "SELECT " + ", ".join(parts) if parts else None


def ordered_read_sql(scope: Scope) -> str:
    """No query: memories oldest first, then chunks by document path and chunk_index, at most
    ``%(k)s`` rows. The columns are the fields of ``DisplayRow``."""
    parts = []
    if scope.store_ids is not None:
        parts.append(f"""(SELECT 0 AS part, '{MEMORY}'::text AS source, m.id AS id, mc.text AS text, m.tags AS tags,
                NULL::varchar AS document_id, NULL::varchar AS document_path, NULL::varchar AS document_title,
                NULL::int AS page, NULL::int AS chunk_index, s.id AS memory_store_id,
                s.name AS memory_store_name, m.created_at AS created_at,
                {tier_sql("m", "s")} AS tier, m.title AS title, m.provenance AS provenance,
                m.lineage AS lineage
            FROM {MEM} m JOIN {CONTENT} mc ON mc.id = m.content_id JOIN {STORE} s ON s.id = m.store_id
            WHERE {memory_where(scope)} AND {in_project('mc')} ORDER BY m.created_at, m.id LIMIT %(k)s)""")
    if scope.search_documents:
        parts.append(f"""(SELECT 1 AS part, '{DOCUMENT}'::text AS source, x.id AS id, x.text AS text, d.tags AS tags,
                d.id AS document_id, d.path AS document_path, d.title AS document_title,
                x.page AS page, x.chunk_index AS chunk_index, NULL AS memory_store_id,
                NULL AS memory_store_name, NULL::timestamptz AS created_at,
                NULL::varchar AS tier, NULL::varchar AS title, dv.provenance AS provenance,
                dv.source_class AS lineage
            FROM {CHUNK} x JOIN {DOC} d ON d.id = x.document_id
            LEFT JOIN {VERSION} dv ON dv.id = x.version_id AND {in_project('dv')}
            WHERE {document_where(scope)} ORDER BY d.path, x.chunk_index LIMIT %(k)s)""")
    # Memories (part 0) by age, then chunks (part 1) by path and position; id breaks ties.
    return (f"SELECT {', '.join(DisplayRow.columns())} FROM ({' UNION ALL '.join(parts)}) u "
            "ORDER BY part, created_at, document_path, chunk_index, id LIMIT %(k)s")


def stored_vectors_sql() -> str:
    """The stored vectors (as text) of the memories ``%(memory_ids)s`` and chunks ``%(chunk_ids)s``
    of the project ``%(project)s`` that have one: columns source, id, embedding."""
    return f"""
    SELECT '{MEMORY}'::text AS source, m.id AS id, c.embedding::text AS embedding
    FROM {MEM} m JOIN {CONTENT} c ON c.id = m.content_id
    WHERE m.id = ANY(%(memory_ids)s) AND {in_project('m', 'c')} AND c.embedding IS NOT NULL
    UNION ALL
    SELECT '{DOCUMENT}'::text, x.id, x.embedding::text FROM {CHUNK} x
    WHERE x.id = ANY(%(chunk_ids)s) AND {in_project('x')} AND x.embedding IS NOT NULL"""


def stored_findings_sql() -> str:
    """The instruction guard's stored findings of the memories ``%(memory_ids)s`` (their content
    row's and their own, with the title, tags and metadata the latter covers) and chunks
    ``%(chunk_ids)s``, of the project ``%(project)s``: columns source, id, guard, memory_guard,
    title, tags, metadata."""
    return f"""
    SELECT '{MEMORY}'::text AS source, m.id AS id, c.guard AS guard, m.guard AS memory_guard,
           m.title AS title, m.tags AS tags, m.metadata AS metadata
    FROM {MEM} m JOIN {CONTENT} c ON c.id = m.content_id WHERE m.id = ANY(%(memory_ids)s) AND {in_project('m', 'c')}
    UNION ALL
    SELECT '{DOCUMENT}'::text, x.id, x.guard, NULL::jsonb, NULL, NULL::jsonb, NULL::jsonb FROM {CHUNK} x
    WHERE x.id = ANY(%(chunk_ids)s) AND {in_project('x')}"""


def hit_entities_sql() -> str:
    """(source, id, entity ids) of the memories ``%(memory_ids)s`` and chunks ``%(chunk_ids)s`` of
    the project ``%(project)s`` that mention an entity (valid edges), each entity once, in id order."""
    return f"""
        SELECT '{MEMORY}'::text, memory_id, array_agg(DISTINCT entity_id ORDER BY entity_id) FROM {EDGE}
        WHERE memory_id = ANY(%(memory_ids)s) AND project_id = %(project)s AND invalid_at IS NULL GROUP BY memory_id
        UNION ALL
        SELECT '{DOCUMENT}'::text, chunk_id, array_agg(DISTINCT entity_id ORDER BY entity_id) FROM {EDGE}
        WHERE chunk_id = ANY(%(chunk_ids)s) AND project_id = %(project)s AND invalid_at IS NULL GROUP BY chunk_id"""
