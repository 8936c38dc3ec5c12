"""The operator console: stock Django admin, extended with what operators need to answer
"why was this fact retired?" and "why is this PDF not searchable?"."""

# Importing the modules registers their ModelAdmins: memories and stores, tenancy (projects,
# API keys), rules and generations, agents, documents and ingestion rules, transform configs and
# replay runs, memory schemas, retention, webhooks, evidence links, distillers, the entity graph.
from . import (  # noqa: F401
    agents,
    distillers,
    documents,
    entities,
    links,
    memories,
    memory_schema,
    replay,
    retention,
    rules,
    tenancy,
    webhooks,
)
