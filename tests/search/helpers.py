"""Fixture helpers: documents and chunks created directly through the ORM (the ingestion
pipeline is tested elsewhere), memories through the write funnel."""

from __future__ import annotations

from typing import Any

from memory_engine.models import Chunk, Document, Memory, MemoryStore, Project
from memory_engine.providers.embeddings import get_embedding_provider
from memory_engine.services.memories import memory_write

#: Twelve texts about nothing the tests search for: more than a search's default limit (10), so a
#: channel that finds what a test asks for has ranked it above them, not returned every row.
FILLER = [
    "Jupiter has at least ninety-five known moons.",
    "Sourdough bread rises slowly overnight in a cool kitchen.",
    "The marathon route crosses four bridges over the river.",
    "Granite is an igneous rock made mostly of quartz and feldspar.",
    "The violin section tunes to the oboe before the concert.",
    "Tomato seedlings need sixteen hours of light to grow strong.",
    "The lighthouse beam can be seen twenty nautical miles away.",
    "Chess openings are studied by memorising long lines of moves.",
    "Glaciers carve U-shaped valleys as they move downhill.",
    "The museum's fossil collection includes a complete triceratops skull.",
    "Cyclists draft behind each other to save energy in the peloton.",
    "Volcanic ash can ground aircraft across an entire continent.",
]


def make_document(project: Project, path: str, chunks: list[str], *, tags: dict[str, Any] | None = None,
                  title: str = "", pages: bool = False, embed: bool = True) -> Document:
    """A ready document whose chunks are embedded with the configured provider."""
    provider = get_embedding_provider() if embed else None
    vectors: list[Any] = provider.embed_documents(chunks) if provider else [None] * len(chunks)
    document = Document.objects.create(
        project=project, path=path, title=title or path.rsplit("/", 1)[-1], content_type="text/plain",
        chunk_strategy="page" if pages else "whole", status="ready", total_chunks=len(chunks),
        indexed_chunks=len(chunks), tags=tags or {},
    )
    Chunk.objects.bulk_create([
        Chunk(document=document, chunk_index=i, page=(i + 1) if pages else None, text=text, embedding=vector,
              embedding_model=provider.model_name if provider and vector is not None else "")
        for i, (text, vector) in enumerate(zip(chunks, vectors, strict=True))
    ])
    return document


def write(store: MemoryStore, content: str, **kwargs: Any) -> Memory:
    """A memory through the funnel; thresholds at 1.0 so near-duplicates stay separate."""
    kwargs.setdefault("duplicate_threshold", 1.0)
    kwargs.setdefault("supersede_threshold", 1.0)
    return memory_write(store=store, content=content, principal="test", **kwargs).memory
