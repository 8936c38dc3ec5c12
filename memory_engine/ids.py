"""Public identifiers: a type prefix and a time-ordered random suffix (``mem_01J…``).

Sequential integers are never exposed; ids sort roughly by creation time, which keeps
B-tree inserts local.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from django.db import models

_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"  # Crockford base32, lower case


def new_id(prefix: str) -> str:
    """``prefix_`` + 10 chars of millisecond time + 16 chars of randomness."""
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    chars = []
    for _ in range(26):
        value, rem = divmod(value, 32)
        chars.append(_ALPHABET[rem])
    return f"{prefix}_{''.join(reversed(chars))}"


class _IdDefault:
    """A picklable, migration-serialisable default callable for one prefix."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def __call__(self) -> str:
        return new_id(self.prefix)


class PublicIdField(models.CharField):
    """Primary key holding a prefixed public id."""

    def __init__(self, *args: Any, prefix: str = "", **kwargs: Any) -> None:
        self.prefix = prefix
        kwargs.setdefault("max_length", 40)
        kwargs.setdefault("primary_key", True)
        kwargs.setdefault("editable", False)
        kwargs["default"] = _IdDefault(prefix)
        super().__init__(*args, **kwargs)

    def deconstruct(self) -> tuple[str, str, Sequence[Any], dict[str, Any]]:
        name, path, args, kwargs = super().deconstruct()
        kwargs.pop("default", None)
        kwargs["prefix"] = self.prefix
        for key, default in (("max_length", 40), ("primary_key", True), ("editable", False)):
            if kwargs.get(key) == default:
                kwargs.pop(key)
        return name, path, args, kwargs
