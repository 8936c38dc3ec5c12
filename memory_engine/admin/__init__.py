"""The operator console: stock Django admin, extended with what operators need to answer
"why was this fact retired?" and "why is this PDF not searchable?"."""

# Importing the modules registers their ModelAdmins: memories and stores, tenancy (projects,
# API keys), rules and generations, agents, documents and ingestion rules, memory schemas.
from . import agents, documents, memories, memory_schema, retention, rules, tenancy  # noqa: F401
