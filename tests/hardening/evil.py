"""Callables the attack tests try to make the server run; every call is recorded in CALLS.

``conv`` sits exactly on an allow-listed prefix in the prefix-boundary tests; ``conv_evil``
only shares its first characters.
"""

from __future__ import annotations

from typing import Any

CALLS: list[str] = []


def record(*args: Any, **kwargs: Any) -> list[str]:
    """Usable as a rule handler (returns facts) and as a converter (returns pages)."""
    CALLS.append("record")
    return ["The attacker's code ran."]


def conv(*args: Any, **kwargs: Any) -> list[str]:
    CALLS.append("conv")
    return ["converted by an allowed callable"]


def conv_evil(*args: Any, **kwargs: Any) -> list[str]:
    CALLS.append("conv_evil")
    return ["converted by a callable outside the allow-list"]
