"""The settings of the read side, in the order of docs/settings.md: lexical search, the fusion,
the graph and vector channels, ranking stage two (the ``SEARCH_*`` knobs' rows come from
:data:`.knobs.SEARCH_KNOBS`), relevance, rerank."""

from __future__ import annotations

from memory_engine.setting_types import integer, number, one_of, optional, probability, section, text

from .declaration import RELEVANCE_MODEL_TYPES, RERANK_TYPES, Setting
from .knobs import SEARCH_KNOBS

READ_SETTINGS: tuple[Setting, ...] = (
    # Read side.
    # Text search config of the lexical indexes (stemming, stop words). Fixed when the
    # indexes are built (migration 0005, `manage.py memory_engine_rebuild_lexical`); a
    # different value later is system check error memory_engine.E010 (docs/retrieval.md).
    Setting("KNOWLEDGE_TEXT_SEARCH_CONFIG", "english", text,
            "str", "`english`",
            "PostgreSQL text search config of the lexical indexes, fixed when they are built (`E010` on a "
            "mismatch; [retrieval](retrieval.md))"),
    # "auto": pg_textsearch BM25 when its indexes exist, else the tsvector fallback;
    # "tsvector": always the fallback (diagnosis, tests).
    Setting("KNOWLEDGE_LEXICAL_BACKEND", "auto", one_of("auto", "tsvector"),
            "`auto` or `tsvector`", "`auto`",
            "`auto`: pg_textsearch BM25 where its indexes exist, else the tsvector fallback; `tsvector`: always "
            "the fallback"),
    # tsvector fallback: rows matching any query term, the top KNOWLEDGE_BM25_CANDIDATES by
    # ts_rank_cd re-scored by Okapi BM25 (the project's own statistics); terms in
    # more than KNOWLEDGE_BM25_MAX_DF of the rows do not select candidates.
    Setting("KNOWLEDGE_BM25_CANDIDATES", 200, integer,
            "int", "200",
            "tsvector fallback: rows re-scored by BM25"),
    Setting("KNOWLEDGE_BM25_K1", 1.2, number,
            "number", "1.2",
            "BM25 term-frequency saturation (both lexical backends)"),
    Setting("KNOWLEDGE_BM25_B", 0.75, number,
            "number", "0.75",
            "BM25 length normalisation (both lexical backends)"),
    Setting("KNOWLEDGE_BM25_MAX_DF", 0.1, number,
            "number", "0.1",
            "tsvector fallback: terms in more than this share of rows do not select candidates"),
    # Fusion (docs/retrieval.md, chosen with bench/eval_retrieval.py: docs/benchmarks.md):
    # each channel contributes its top max(limit, depth) candidates; score = sum of
    # weight / (SEARCH_RRF_K + rank). A request may override rrf_k and both weights.
    SEARCH_KNOBS["rrf_k"].setting_row(
        "RRF constant k (a request's `rrf_k` overrides)"),
    Setting("SEARCH_VECTOR_DEPTH", 20, integer,
            "int", "20",
            "candidates the vector channel contributes (at least `limit`)"),
    Setting("SEARCH_LEXICAL_DEPTH", 20, integer,
            "int", "20",
            "candidates the lexical channel contributes (at least `limit`)"),
    SEARCH_KNOBS["vector_weight"].setting_row(
        "the vector channel's RRF weight (request `vector_weight` overrides)"),
    SEARCH_KNOBS["lexical_weight"].setting_row(
        "the lexical channel's RRF weight (request `lexical_weight` overrides)"),
    # The graph channel (docs/entities.md, *The graph channel*): the memories that mention the
    # entities a query names (and their neighbours), a third ranked list in the fusion.
    Setting("SEARCH_GRAPH_WEIGHT", 0.0, number,
            "number", "0.0",
            "the graph channel's RRF weight: memories that mention the entities a query names (and, with "
            "`SEARCH_GRAPH_HOPS`, their neighbours) as a third ranked list; 0: off ([entities](entities.md))"),
    Setting("SEARCH_GRAPH_DEPTH", 20, integer,
            "int", "20",
            "candidates the graph channel contributes (at least `limit`)"),
    Setting("SEARCH_GRAPH_HOPS", 0, integer,
            "int (0–2)", "0",
            "graph channel: 0 the query's entities only; 1 and 2 add the entities named most often with them "
            "(and with those), each hop weighing half the one before"),
    Setting("SEARCH_GRAPH_NEIGHBOURS", 5, integer,
            "int", "5",
            "graph channel: most neighbour entities one hop adds"),
    # Neighbouring turns (docs/retrieval.md, *Neighbouring turns*): what answers a question said in
    # a conversation is often the turn after (or before) the one that matches it best.
    Setting("SEARCH_CONTEXT_TURNS", 2, integer,
            "int", "2",
            "turns before and after each of the top `limit` hits written as conversation turns (a write "
            "with `conversation_id`), of the same conversation, that gain a share of its score; 0: off"),
    Setting("SEARCH_CONTEXT_WEIGHT", 0.35, number,
            "number", "0.35",
            "the share of a top hit's fused score each of its neighbouring turns gains"),
    Setting("SEARCH_CONTEXT_GAP_MINUTES", 60, number,
            "number", "60",
            "a neighbouring turn was written at most this many minutes before or after the hit"),
    # Vector channel: HNSW with pgvector 0.8 iterative index scans, so a filtered scan keeps
    # going until `limit` rows pass the scope (up to HNSW_MAX_SCAN_TUPLES visited tuples).
    Setting("HNSW_EF_SEARCH", 100, integer,
            "int", "100",
            "HNSW `ef_search` for dedup and search"),
    Setting("HNSW_ITERATIVE_SCAN", "relaxed_order", one_of("off", "relaxed_order", "strict_order"),
            "`off`, `relaxed_order` or `strict_order`", "`relaxed_order`",
            "pgvector 0.8 iterative index scans: a filtered HNSW scan keeps going until `limit` rows pass the "
            "scope"),
    Setting("HNSW_MAX_SCAN_TUPLES", 20000, integer,
            "int", "20000",
            "most tuples one iterative scan visits"),
    # Search scopes (valid memories / chunks) up to this size are ranked by an exact cosine
    # scan instead: as fast as the iterative HNSW scan up to ~2,000 rows, and exact
    # (measured in docs/benchmarks.md, "Exact scan or HNSW").
    Setting("SEARCH_EXACT_SCAN_MAX", 2000, integer,
            "int", "2000",
            "search scopes up to this size are ranked by an exact scan (memories: read from the memory rows, "
            "content rows by key)"),
    # Ranking stage two (docs/retrieval.md, *After the fusion*; measured in docs/benchmarks.md).
    # Each stage is on by default only where bench/eval_retrieval.py measured a gain.
    # One best chunk per document before the cut (request: dedupe_documents).
    SEARCH_KNOBS["dedupe_documents"].setting_row(
        "keep one best chunk per document before the cut (request `dedupe_documents` overrides); off: no "
        "measured gain on the shared splits ([benchmarks](benchmarks.md), \"Ranking stage two\")"),
    # Maximal marginal relevance over the stored vectors of the first SEARCH_MMR_POOL hits
    # (request: mmr); lambda weighs relevance against novelty.
    SEARCH_KNOBS["mmr"].setting_row(
        "reorder the first `SEARCH_MMR_POOL` hits by maximal marginal relevance over their stored vectors "
        "(request `mmr` overrides); hits without a vector follow, never dropped"),
    Setting("SEARCH_MMR_LAMBDA", 0.7, number,
            "number", "0.7",
            "MMR: weight of relevance against novelty"),
    Setting("SEARCH_MMR_POOL", 20, integer,
            "int", "20",
            "MMR: how many of the first hits it reorders"),
    # The authority prior: a hit's fused score times 1 + w × authority (a chunk's version's
    # capture fields, a memory's confidence; selectors.search.boosts), clamped to [0.7, 1.3].
    # 0: off (the shared splits have uniform authority: no measurable gain).
    SEARCH_KNOBS["authority_weight"].setting_row(
        "authority prior: a hit's fused score × `1 + w × authority` (a chunk's version's capture fields, a "
        "memory's confidence), clamped to [0.7, 1.3]; 0: off — no measurable gain on the shared splits, "
        "whose authority is uniform ([retrieval](retrieval.md), *Authority and the bounded boosts*)"),
    # Bounded boosts: recency by class (events decay over SEARCH_BOOST_HALF_LIFE_DAYS, states
    # and lessons do not), each and their product clamped to [0.7, 1.3].
    SEARCH_KNOBS["boosts"].setting_row(
        "bounded boosts: recency by class (events decay, states do not), clamped to [0.7, 1.3] with the "
        "other multipliers"),
    Setting("SEARCH_BOOST_HALF_LIFE_DAYS", 30.0, number,
            "number", "30.0",
            "`SEARCH_BOOSTS`: an event's recency boost is 1.3 when new, 1.0 after this many days, towards 0.7"),
    # Corroboration: a hit supported by N live items (evidence links) times 1 + SUPPORT × min(N,
    # CAP), contradicted times 1 − CONTRADICT × min(N, CAP), inside the same clamp. 0: off (the
    # shared splits record no links: nothing to measure).
    SEARCH_KNOBS["corroboration_support"].setting_row(
        "corroboration: a hit supported by N live items (evidence links) × `1 + a × min(N, CAP)`; 0: off — "
        "the shared splits record no links ([retrieval](retrieval.md), *Evidence links*)"),
    SEARCH_KNOBS["corroboration_contradict"].setting_row(
        "corroboration: a hit contradicted by N live items × `1 − b × min(N, CAP)`; 0: off. Both inside the "
        "[0.7, 1.3] clamp"),
    SEARCH_KNOBS["corroboration_cap"].setting_row(
        "corroboration: at most this many links of each kind count"),
    # Relevance (memory_engine.relevance, docs/retrieval.md "Relevance"): each hit's relevance in
    # [0, 1] from a small model over what the search knows of it. A hit is relevant at or above
    # SEARCH_MIN_RELEVANCE (an agent's knowledge_config.min_relevance, a search's min_relevance
    # override it); push injection and the search_knowledge tool hand only relevant hits to a
    # model. Calibrated on the shared dev data (docs/benchmarks.md, "Relevance").
    SEARCH_KNOBS["min_relevance"].setting_row(
        "relevance threshold: a hit is `relevant` at or above it. Push injection and the `search_knowledge` "
        "tool hand on only relevant hits (an agent's `knowledge_config.min_relevance` overrides; a search's "
        "`min_relevance` filters). Chosen on the train half of the shared dev data for the built-in model "
        "([retrieval](retrieval.md#relevance), [benchmarks](benchmarks.md#relevance)); 0 lets every hit "
        "through"),
    # `evidence: strong` needs the first relevant hit at or above this relevance (else weak; none
    # when no hit is relevant).
    Setting("EVIDENCE_STRONG_RELEVANCE", 0.94, probability,
            "number (0–1)", "0.94",
            "`evidence: strong` needs the first relevant hit at or above this relevance (else `weak`; `none` "
            "when no hit is relevant)"),
    # None: the built-in model, calibrated for all-MiniLM-L6-v2. Another embedder's cosines have
    # another scale: fit its own with bench/relevance.py --fit and paste what it prints:
    # {"VERSION": ..., "EMBEDDING_MODEL": ..., "GATE": {"intercept": ..., "top_cosine": ...},
    #  "WEIGHTS": {"intercept": ..., "cosine": ..., "cosine_gap": ..., ...}}.
    Setting("RELEVANCE_MODEL", None, optional(section(RELEVANCE_MODEL_TYPES)),
            "dict or None", "`None`",
            "the relevance model. `None`: the built-in one (`minilm-l6-v2/1`), calibrated for all-MiniLM-L6-v2 "
            "and used only with that embedder (any runtime); with another embedder nothing is judged (every hit "
            "counts as relevant) and check `memory_engine.W014` says so. A dict is a model of your own, as "
            "`bench/relevance.py --fit` prints it: `{\"VERSION\": str, \"EMBEDDING_MODEL\": str, \"GATE\": "
            "{\"intercept\", \"top_cosine\"}, \"WEIGHTS\": {\"intercept\", \"cosine\", \"cosine_gap\", "
            "\"lexical_share\", \"vector_rank\", \"lexical_rank\", \"rerank\"}}` (numbers; a feature left out "
            "weighs 0; an unknown name is the error `memory_engine.E021`)"),
    # A cross-encoder over the fused top TOP_N: {"PROVIDER": "tei" | "cohere" | "jina" | a dotted
    # path to a RerankProvider subclass, "MODEL": ..., "OPTIONS": {"BASE_URL": ..., "API_KEY": ...},
    # "TOP_N": 50, "TIMEOUT": 5}. None: no reranking (no offline cross-encoder comes with the package).
    Setting("RERANK", None, optional(section(RERANK_TYPES)),
            "dict or None", "`None`",
            "a rerank provider over the fused top: `{\"PROVIDER\": \"tei\" \\| \"cohere\" \\| \"jina\" \\| "
            "dotted path, \"MODEL\", \"OPTIONS\": {\"BASE_URL\", \"API_KEY\", \"RETRIES\"}, \"TOP_N\": 50, "
            "\"TIMEOUT\": 5}`; off by default: no offline cross-encoder's weights come from the package "
            "registry ([retrieval](retrieval.md), \"Rerank\")"),
)
