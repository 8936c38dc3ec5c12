"""Converters: turn a file the native extractors cannot read into pages.

An :class:`~memory_engine.models.IngestionRule` names one converter, either a Python
callable by import path or an HTTP endpoint. Both answer the same shapes:

* a list of pages, each a string or ``{"text": ..., "page": n}`` (an HTTP converter
  wraps it as ``{"pages": [...]}``);
* ``{"status": "pending"}``: the pages will arrive later at the signed callback URL.

Every outbound call has a timeout (the rule's ``converter_timeout``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memory_engine.chunking import Page, clean_text
from memory_engine.conf import resolve_provider
from memory_engine.exceptions import ConverterBadResponse, ConverterError, ConverterFailed

__all__ = ["ConverterError", "ConverterRequest", "ConverterResult", "parse_pages", "run_converter"]

MAX_CONVERTER_PAGES = 100_000


@dataclass
class ConverterRequest:
    """What a converter is given. ``callback_url`` is where a pending converter delivers pages;
    the tokens go in the ``X-Memory-Engine-Token`` header of the callback and download requests."""

    data: bytes
    content_type: str
    filename: str
    document: Any
    callback_url: str = ""
    callback_token: str = ""
    download_url: str = ""
    download_token: str = ""


@dataclass
class ConverterResult:
    pages: list[Page] = field(default_factory=list)
    pending: bool = False


def parse_pages(answer: Any, *, source: str) -> list[Page]:
    """``["text", {"text": "...", "page": 2}, ...]`` -> pages (numbered from 1 when not given)."""
    if not isinstance(answer, list):
        raise ConverterBadResponse(
            f"The converter {source} must answer a list of pages (strings or {{\"text\", \"page\"}} objects).",
            details={"got": type(answer).__name__},
        )
    if len(answer) > MAX_CONVERTER_PAGES:
        raise ConverterBadResponse(f"The converter {source} answered too many pages.",
                                   details={"pages": len(answer), "max": MAX_CONVERTER_PAGES})
    pages: list[Page] = []
    for position, item in enumerate(answer, start=1):
        if isinstance(item, str):
            text, number = item, position
        elif isinstance(item, dict) and isinstance(item.get("text"), str):
            text, number = item["text"], item.get("page", position)
            if number is not None and (not isinstance(number, int) or isinstance(number, bool) or number < 1):
                raise ConverterBadResponse(f"The converter {source} gave page {number!r}; pages are integers >= 1.",
                                           details={"index": position - 1})
        else:
            raise ConverterBadResponse(
                f"Page {position} from the converter {source} is neither a string nor {{\"text\": ...}}.",
                details={"index": position - 1},
            )
        pages.append(Page(text=clean_text(text), number=number))
    return pages


def parse_answer(answer: Any, *, source: str) -> ConverterResult:
    """Accept a page list, ``{"pages": [...]}`` or ``{"status": "pending"}``."""
    if isinstance(answer, dict):
        if answer.get("status") == "pending":
            return ConverterResult(pending=True)
        if "pages" in answer:
            return ConverterResult(pages=parse_pages(answer["pages"], source=source))
        if answer.get("status") == "failed" or "error" in answer:
            raise ConverterFailed(f"The converter {source} reported a failure.",
                                  details={"error": str(answer.get("error", ""))[:500]})
    return ConverterResult(pages=parse_pages(answer, source=source))


def run_converter(rule: Any, request: ConverterRequest) -> ConverterResult:
    """Run the rule's converter (callable or HTTP) with its timeout."""
    result: ConverterResult = resolve_provider("converter", rule.converter_type)(rule, request)
    return result
