"""Pluggable providers: embeddings, LLM completions, document converters."""
