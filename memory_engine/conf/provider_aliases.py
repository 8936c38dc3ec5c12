"""Provider aliases (:data:`PROVIDERS`) and :func:`resolve_provider`, the one cached lookup of
the class (or function) a configured provider name stands for."""

from __future__ import annotations

import functools
from typing import Any

from django.utils.module_loading import import_string

from .engine import reloads_with_settings

#: Provider aliases by kind -> dotted paths. An EMBEDDING PROVIDER not listed here is taken as a
#: dotted path to an EmbeddingProvider subclass; rule handler and converter types must be listed.
PROVIDERS: dict[str, dict[str, str]] = {
    "embedding": {
        "onnx": "memory_engine.providers.embeddings.onnx.OnnxEmbeddingProvider",
        "sentence_transformers": (
            "memory_engine.providers.embeddings.sentence_transformers.SentenceTransformersProvider"
        ),
        "ollama": "memory_engine.providers.embeddings.http.OllamaEmbeddingProvider",
        "openai": "memory_engine.providers.embeddings.http.OpenAIEmbeddingProvider",
    },
    # MEMORY_ENGINE["RERANK"]["PROVIDER"] -> the RerankProvider subclass; a dotted path also works.
    "rerank": {
        "tei": "memory_engine.providers.rerank.http.TEIRerankProvider",
        "cohere": "memory_engine.providers.rerank.http.CohereRerankProvider",
        "jina": "memory_engine.providers.rerank.http.JinaRerankProvider",
    },
    # MemoryRule.handler_type -> the RuleHandler subclass serving it.
    "rule_handler": {
        "builtin": "memory_engine.providers.rule_handlers.builtin.BuiltinHandler",
        "callable": "memory_engine.providers.rule_handlers.callable.CallableHandler",
        "http": "memory_engine.providers.rule_handlers.http.HttpHandler",
    },
    # ENTITY_EXTRACTOR -> the EntityExtractor subclass; a dotted path also works.
    "entity_extractor": {
        "rules": "memory_engine.providers.entities.RuleExtractor",
        "llm": "memory_engine.providers.entities.LLMExtractor",
    },
    # IngestionRule.converter_type -> the function running it.
    "converter": {
        "http": "memory_engine.providers.converters.http.run_http_converter",
        "callable": "memory_engine.providers.converters.callable.run_callable_converter",
    },
}
EMBEDDING_PROVIDERS = PROVIDERS["embedding"]

#: Kinds whose configured name may be a dotted path instead of an alias.
DOTTED_PATH_KINDS = frozenset({"embedding", "rerank", "entity_extractor"})


@functools.cache
def resolve_provider(kind: str, name: str) -> Any:
    """The class (or function) that provider ``name`` of ``kind`` stands for, imported once and
    cached until MEMORY_ENGINE changes; KeyError for an unknown alias of a kind without paths."""
    aliases = PROVIDERS[kind]
    path = aliases[name] if name in aliases or kind not in DOTTED_PATH_KINDS else name
    return import_string(path)


reloads_with_settings(resolve_provider.cache_clear)
