"""Callable rule handlers used by the tests and the worker (imported by path)."""

from __future__ import annotations

from typing import Any

from memory_engine.services.rules import Fact


def facts_from_output(transcript: str, rule: Any, generation: Any) -> list[Any]:
    """One fact per line of the reply: plain strings, and a Fact with tags for lines with ':'."""
    facts: list[Any] = []
    for line in (generation.output or "").splitlines():
        if ":" in line:
            kind, _, text = line.partition(":")
            facts.append(Fact(content=text.strip(), tags={"kind": kind.strip()}))
        elif line.strip():
            facts.append(line.strip())
    return facts


def echo_transcript(transcript: str, rule: Any, generation: Any) -> list[str]:
    return [f"Transcript was: {transcript}"]


def explode(transcript: str, rule: Any, generation: Any) -> list[str]:
    raise RuntimeError("handler bug")


def not_a_list(transcript: str, rule: Any, generation: Any) -> Any:
    return 42
