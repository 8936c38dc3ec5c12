"""memory_engine: durable agent memory and a searchable document library on PostgreSQL + pgvector."""

__version__ = "0.1.0"
