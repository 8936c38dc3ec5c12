"""The API's strict input: memory_engine.strict (shared with the agent tools and MCP)."""

from memory_engine.strict import (
    ALWAYS_KNOWN,
    JSONObjectField,
    ModelSerializer,
    Serializer,
    StrictCharField,
    StrictInput,
    refuse_unknown,
)

__all__ = ["ALWAYS_KNOWN", "JSONObjectField", "ModelSerializer", "Serializer", "StrictCharField", "StrictInput",
           "refuse_unknown"]
