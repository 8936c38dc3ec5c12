"""The optional same-fact judge: one yes/no question to the configured LLM.

Consulted by the write funnel only when a store enables it (``judge_enabled``), an LLM
is configured, and the best match's cosine lies between ``JUDGE_FLOOR`` and the store's
supersede threshold — the band where the embedder cannot tell an update of a fact from
a different fact. Tool-less, temperature 0, a short timeout; on any failure the verdict
is ``same_fact=None`` and the funnel keeps its cosine decision, recording the error.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

from memory_engine.conf import engine_settings
from memory_engine.exceptions import JudgeUnparseable, LLMError
from memory_engine.providers.llm import LLMProvider, get_llm_provider

PROMPT = (
    "You compare two statements stored in an assistant's long-term memory.\n"
    "Answer YES if the second statement describes the same fact as the first and replaces it "
    "(an update, a correction, or a change of the same attribute of the same subject).\n"
    "Answer NO if they are different facts that can both be true.\n"
    "Answer with one word: YES or NO."
)

_ANSWER = re.compile(r"\b(yes|no|true|false)\b", re.IGNORECASE)


@dataclass
class JudgeVerdict:
    """``same_fact`` is True/False, or None when the judge failed (cosine decision kept)."""

    same_fact: bool | None
    similarity: float
    answer: str = ""
    error: str = ""
    error_code: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v not in ("", None) or k == "same_fact"}


class SameFactJudge:
    """Callable ``judge(old_text, new_text, similarity) -> JudgeVerdict | None``.

    Returns None (not consulted) below the floor.
    """

    def __init__(self, provider: LLMProvider, *, floor: float | None = None, timeout: float | None = None) -> None:
        self.provider = provider
        self.floor = engine_settings.JUDGE_FLOOR if floor is None else floor
        self.timeout = engine_settings.JUDGE_TIMEOUT if timeout is None else timeout

    def __call__(self, old_text: str, new_text: str, similarity: float) -> JudgeVerdict | None:
        if similarity < self.floor:
            return None
        messages = [
            {"role": "system", "content": PROMPT},
            {"role": "user", "content": f"First statement: {old_text}\nSecond statement: {new_text}\n"
                                        "Same fact, replaced by the second? YES or NO."},
        ]
        try:
            answer = self.provider.complete(messages, temperature=0.0, max_tokens=3, timeout=self.timeout)
        except LLMError as exc:
            return JudgeVerdict(same_fact=None, similarity=similarity, error=exc.message, error_code=exc.code)
        match = _ANSWER.search(answer or "")
        if match is None:
            return JudgeVerdict(same_fact=None, similarity=similarity, answer=(answer or "")[:200],
                                error=JudgeUnparseable.default_message, error_code=JudgeUnparseable.code)
        return JudgeVerdict(same_fact=match.group(1).lower() in ("yes", "true"), similarity=similarity,
                            answer=answer.strip()[:200])


def get_judge() -> SameFactJudge | None:
    """The judge for the configured LLM, or None when no LLM is configured."""
    provider = get_llm_provider()
    return SameFactJudge(provider) if provider is not None else None
