"""A memory-rule handler for the dry-run tests: one fact per ``fact:`` line of the transcript."""

from __future__ import annotations

from typing import Any


def fact_lines(transcript: str, rule: Any, generation: Any) -> list[Any]:
    facts: list[Any] = []
    for line in transcript.splitlines():
        line = line.split(":", 1)[-1].strip() if line.startswith(("user:", "assistant:")) else line.strip()
        if line.lower().startswith("fact "):
            text, _, about = line[5:].partition(" | about ")
            kind, _, key = about.partition("/")
            facts.append({"content": text.strip(), "about": {"kind": kind, "key": key} if about else None})
    return facts
