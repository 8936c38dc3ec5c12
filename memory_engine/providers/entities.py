"""Entity extractors behind one interface (``ENTITY_EXTRACTOR``, docs/entities.md).

    extractor = get_entity_extractor()      # None when ENTITY_EXTRACTOR is None
    mentions = extractor.extract(["Ana leads the Lisbon office."])[0]

``rules`` (the default) is memory_engine.mentions' rule extractor: offline, deterministic,
tens of microseconds a text. ``llm`` asks the configured LLM in the builtin rule handler's
style (tool-less, temperature 0, the answer read leniently between the first ``[`` and the
last ``]``, capped) and falls back to the rules for a text whose call fails, so extraction never
fails for want of a model. A dotted path names another :class:`EntityExtractor` subclass (a
spaCy pipeline, a GLiNER model: docs/benchmarks.md, "Entity extraction", measures one).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from typing import Any

from memory_engine.conf import engine_settings, resolve_provider
from memory_engine.exceptions import LLMError
from memory_engine.mentions import DATE, ENTITY_KINDS, MAX_NAME_CHARS, MENTION, SPEAKER, SUBJECT, Mention
from memory_engine.mentions import extract_mentions as rule_mentions
from memory_engine.mentions.rules import canonical_date

from .llm import get_llm_provider

__all__ = ["EntityExtractor", "LLMExtractor", "RuleExtractor", "get_entity_extractor"]

logger = logging.getLogger("memory_engine.entities")

#: Most entities kept of one text (an LLM answer is cut there).
MAX_MENTIONS = 30
#: Longest text one LLM call reads.
LLM_MAX_CHARS = 6000


class EntityExtractor:
    """Reads the entities of texts. ``name`` is recorded on the edges it makes."""

    name = ""

    def extract(self, texts: Sequence[str]) -> list[list[Mention]]:
        """The mentions of each text, in order (a text with none: an empty list)."""
        raise NotImplementedError(".extract() must be overridden")


class RuleExtractor(EntityExtractor):
    """memory_engine.mentions.extract_mentions."""

    name = "rules"

    def extract(self, texts: Sequence[str]) -> list[list[Mention]]:
        return [rule_mentions(text)[:MAX_MENTIONS] for text in texts]


PROMPT = """You list the named entities of a text stored in an assistant's memory.

Name the people, organizations, places, products (software, devices, books, films, drugs) \
and other named things (events, laws, diseases, organisms), and the dates that name a day, \
weekday, month or year. Skip pronouns, common nouns, relative dates ("yesterday", "last week"), \
nationalities and languages. Mark the one the text is about (its subject) with "subject": true.

Answer with a JSON array only, no prose: [{"name": "...", "kind": \
"person|organization|place|product|date|other", "subject": false}]. Write each name as the text \
does; return [] when there is none."""


class LLMExtractor(EntityExtractor):
    """The configured LLM, one tool-less temperature-0 call a text; the rules where it fails
    (no LLM configured, a timeout, an answer without a JSON array). A ``Name:`` speaker prefix is
    read by the rules either way (a chat convention, not something to ask a model)."""

    name = "llm"

    def extract(self, texts: Sequence[str]) -> list[list[Mention]]:
        provider = get_llm_provider()
        out = []
        for text in texts:
            ruled = rule_mentions(text)
            if provider is None:
                out.append(ruled[:MAX_MENTIONS])
                continue
            try:
                reply = provider.complete([{"role": "system", "content": PROMPT},
                                           {"role": "user", "content": text[:LLM_MAX_CHARS]}], temperature=0.0)
                answer = parse_entities(reply)
            except (LLMError, ValueError) as exc:
                logger.warning("LLM entity extraction failed; using the rules: %s", exc)
                out.append(ruled[:MAX_MENTIONS])
                continue
            speaker = [m for m in ruled if m.role == SPEAKER]
            out.append((speaker + [m for m in answer if (m.name, m.kind) not in {(s.name, s.kind) for s in speaker}])
                       [:MAX_MENTIONS])
        return out


def parse_entities(reply: str) -> list[Mention]:
    """Mentions from a model's answer: the JSON array between its first ``[`` and last ``]``,
    items ``{"name", "kind", "subject"}`` (a bare string is a name of kind other); unknown kinds
    are ``other``, dates are kept only when canonical_date reads them. ValueError when the answer
    holds no array."""
    start, end = reply.find("["), reply.rfind("]")
    if start < 0 or end < start:
        raise ValueError("the answer holds no JSON array")
    items = json.loads(reply[start:end + 1])
    if not isinstance(items, list):
        raise ValueError("the answer is not a JSON array")
    found: list[Mention] = []
    for item in items[:MAX_MENTIONS]:
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict) or not isinstance(item.get("name"), str) or not item["name"].strip():
            continue
        kind = item.get("kind") if item.get("kind") in ENTITY_KINDS else "other"
        name = " ".join(item["name"].split())[:MAX_NAME_CHARS]
        if kind == DATE:
            canonical = canonical_date(name)
            if canonical is None:
                continue
            name = canonical
        role = SUBJECT if item.get("subject") is True and not any(m.role == SUBJECT for m in found) else MENTION
        found.append(Mention(name=name, kind=str(kind), role=role))
    return found


def get_entity_extractor() -> EntityExtractor | None:
    """The ENTITY_EXTRACTOR's extractor; None when it is None (no graph is made)."""
    name: Any = engine_settings.ENTITY_EXTRACTOR
    if not name:
        return None
    extractor: EntityExtractor = resolve_provider("entity_extractor", name)()
    return extractor
