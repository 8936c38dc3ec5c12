"""Text and chat-message helpers shared by every layer (base layer: imports only exceptions).

* :func:`contains_nul`: PostgreSQL ``text`` and ``jsonb`` cannot hold NUL characters, so
  every input that reaches a column is checked with this one function;
* :func:`expand_ligatures`: the typographic ligatures PDF fonts set (ﬁ, ﬂ, ﬀ...) as their letters;
* :func:`validate_messages`: the OpenAI chat format accepted wherever messages come in;
* :func:`content_text`: the text of one message's ``content`` (a string or text parts);
* :func:`text_preview`: the head of a long body, as recall shows it (docs/memory.md);
* :func:`redact_url`: a URL without credentials or query string, for messages, logs and pages.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from memory_engine.exceptions import ValidationFailed

__all__ = ["contains_nul", "content_text", "expand_ligatures", "redact_url", "text_preview", "validate_messages"]

# Unicode's Latin ligatures (U+FB00-U+FB06: ﬀ ﬁ ﬂ ﬃ ﬄ ﬅ ﬆ), presentation forms of the letters
# they join and nothing else. pypdf gives them as a PDF font's ToUnicode map names them (LaTeX
# documents set one in most words with "fi", "ff" or "fl"), and neither the embedder's tokenizer
# (which reads "deﬁned" as an unknown word) nor PostgreSQL's text search ("deﬁn" is not "defin")
# treats them as the letters.
_LIGATURE = re.compile("[\ufb00-\ufb06]")
_LIGATURE_LETTERS = {chr(code): unicodedata.normalize("NFKC", chr(code)) for code in range(0xFB00, 0xFB07)}


def contains_nul(value: Any) -> bool:
    """True when a NUL character hides in a string, or in any key or string of a JSON value;
    iterative, so deep values cannot exhaust the stack."""
    stack = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if "\x00" in node:
                return True
        elif isinstance(node, dict):
            stack.extend(node.keys())
            stack.extend(node.values())
        elif isinstance(node, (list, tuple)):
            stack.extend(node)
    return False


def expand_ligatures(text: str) -> str:
    """``text`` with each Latin ligature (ﬁ, ﬂ, ﬀ, ﬃ, ﬄ, ﬅ, ﬆ) written as the letters it joins;
    nothing else changes (not a full NFKC: "m²" stays "m²")."""
    if _LIGATURE.search(text) is None:
        return text
    return _LIGATURE.sub(lambda match: _LIGATURE_LETTERS[match.group()], text)


def validate_messages(messages: Any, *, field: str = "messages") -> list[dict[str, Any]]:
    """OpenAI chat format: a list of ``{role, content}`` objects (content a string, a list of
    parts or null) without NUL characters; 400 VALIDATION_FAILED naming ``field`` otherwise."""
    if not isinstance(messages, list):
        raise ValidationFailed(f"`{field}` must be a list of {{role, content}} objects.", details={"field": field})
    for index, message in enumerate(messages):
        if not isinstance(message, dict) or not isinstance(message.get("role"), str):
            raise ValidationFailed(f"Each of `{field}` must be an object with a string `role`.",
                                   details={"field": field, "index": index})
        content = message.get("content")
        if content is not None and not isinstance(content, (str, list)):
            raise ValidationFailed("A message's `content` must be a string, a list of parts or null.",
                                   details={"field": field, "index": index})
    if contains_nul(messages):
        raise ValidationFailed(f"`{field}` must not contain NUL characters.", details={"field": field})
    return messages


def content_text(content: Any, *, separator: str = "\n") -> str:
    """The text of a message's ``content``: the string itself, or the ``text`` of every
    part that has one (OpenAI / Anthropic content parts) joined by ``separator``; images
    and other parts without text are left out, anything else reads as ``""``."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return separator.join(
            part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)
        )
    return ""


def text_preview(text: str, limit_bytes: int) -> tuple[str, bool]:
    """``(preview, has_full_body)``: the text itself when its UTF-8 form fits in ``limit_bytes``,
    else its first ``limit_bytes`` bytes cut at a character boundary, then back to the last
    whitespace when one lies in the second half (no word cut in two), with trailing space removed."""
    encoded = text.encode("utf-8")
    if len(encoded) <= limit_bytes:
        return text, False
    head = encoded[:max(0, limit_bytes)].decode("utf-8", errors="ignore")
    cut = max(head.rfind(" "), head.rfind("\n"), head.rfind("\t"))
    if cut > len(head) // 2:
        head = head[:cut]
    return head.rstrip(), True


def redact_url(url: str) -> str:
    """The URL without credentials or query string, for messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<invalid url>"
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path, "", ""))
