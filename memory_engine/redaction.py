"""What the API and the admin show of stored secrets: never the secret itself.

Rule handler configs keep an HMAC ``secret`` and may keep a provider ``API_KEY``;
ingestion rules keep a converter secret. Readers see :data:`SECRET_MASK` (or "set" /
"not set"); an editor who sends the mask back keeps the stored value.
"""

from __future__ import annotations

import copy
from typing import Any

from memory_engine.providers.http import redact_url

#: Shown instead of a stored secret; sent back unchanged, it keeps the stored value.
SECRET_MASK = "***"
#: Where secrets sit inside a memory rule's ``handler_config``.
HANDLER_SECRET_PATHS: tuple[tuple[str, ...], ...] = (("secret",), ("provider", "API_KEY"))


def _parent(config: dict[str, Any], path: tuple[str, ...]) -> dict[str, Any] | None:
    node: Any = config
    for key in path[:-1]:
        node = node.get(key) if isinstance(node, dict) else None
    return node if isinstance(node, dict) else None


def mask_handler_config(config: dict[str, Any] | None, *, redact_urls: bool = False) -> dict[str, Any]:
    """A copy of ``config`` with every set secret replaced by :data:`SECRET_MASK`; with
    ``redact_urls`` also URLs without credentials or query string (for readers who may not edit)."""
    masked = copy.deepcopy(config or {})
    for path in HANDLER_SECRET_PATHS:
        parent = _parent(masked, path)
        if parent is not None and parent.get(path[-1]):
            parent[path[-1]] = SECRET_MASK
    if redact_urls:
        for parent, key in ((masked, "url"), (_parent(masked, ("provider", "BASE_URL")), "BASE_URL")):
            if parent is not None and isinstance(parent.get(key), str) and parent[key]:
                parent[key] = redact_url(parent[key])
    return masked


def restore_masked_secrets(config: dict[str, Any] | None, stored: dict[str, Any] | None) -> dict[str, Any]:
    """``config`` as edited, with each secret still equal to the mask (or blank) put back
    to its stored value; a secret whose key was removed stays removed."""
    restored = copy.deepcopy(config or {})
    for path in HANDLER_SECRET_PATHS:
        parent, old_parent = _parent(restored, path), _parent(stored or {}, path)
        key = path[-1]
        if parent is None or key not in parent or parent[key] not in (SECRET_MASK, ""):
            continue
        if old_parent is not None and old_parent.get(key):
            parent[key] = old_parent[key]
        else:
            del parent[key]
    return restored


def converter_target(rule: Any) -> str:
    """An ingestion rule's converter for lists and console pages: its callable, or its URL
    without credentials or query string."""
    return redact_url(rule.converter_url) if rule.converter_type == "http" else rule.converter_path


def secret_state(value: str | None) -> str:
    """"set" or "not set": all a page ever says about a stored secret."""
    return "set" if value else "not set"
