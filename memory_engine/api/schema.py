"""The app's own OpenAPI schema settings, so /api/schema/ describes memory_engine's API
whatever the host's ``SPECTACULAR_SETTINGS`` say (or if it has none).

The schema view (:class:`memory_engine.api.openapi.SchemaView`) applies them on each request
and leaves itself out of the schema. These are plain values (nothing here imports DRF), so
a host's settings module may reuse them: ``SPECTACULAR_SETTINGS = SCHEMA_SETTINGS`` makes
``manage.py spectacular`` print the schema the app serves.
"""

from __future__ import annotations

from typing import Any

from memory_engine import __version__

SCHEMA_SETTINGS: dict[str, Any] = {
    "TITLE": "memory_engine API",
    "DESCRIPTION": "Durable agent memory and a searchable document library on PostgreSQL + pgvector.",
    "VERSION": __version__,
    # Separate request and response components: read-only fields (id, created_at, …) are
    # never required in a request body.
    "COMPONENT_SPLIT_REQUEST": True,
    # "status" choice sets that would otherwise collide on one generated name.
    "ENUM_NAME_OVERRIDES": {"StatusEnum": "memory_engine.models.agents.GenerationStatus",
                            "ReplayRunStatusEnum": "memory_engine.models.replay.ReplayRun.Status",
                            "FeedKindEnum": "memory_engine.models.feed.FeedKind",
                            "LineageEnum": "memory_engine.models.origin.Lineage",
                            "ConsentCategoryEnum": "memory_engine.consent_categories.ConsentCategory",
                            "EntityKindEnum": "memory_engine.models.entities.EntityKind",
                            "EntityRelationEnum": "memory_engine.models.entities.Relation"},
}
