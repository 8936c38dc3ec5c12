"""The grammar of grants (docs/security.md, *Access inside a project*): actions, tag patterns and
their matching. No decisions live here: :mod:`memory_engine.policy` decides who sees and does
what; this module only parses and matches the lists that API keys and staff users carry.

Documents and memory stores carry ``access_tags``; a principal's ``grants`` map tag patterns
(fnmatch: ``team:*``) to actions. A principal with grants reaches an object when one of the
object's tags matches a pattern granted that action, and always (for every action but ``hold``)
the objects tagged with its own owner tag. ``hold`` (releasing a legal hold) is never implied:
only a pattern that names it grants it.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from memory_engine.exceptions import ValidationFailed

SEARCH = "search"
ADD = "add"
FORGET = "forget"
PURGE = "purge"
#: Releasing a legal hold: granted only by a pattern that names it (never by an owner tag).
HOLD = "hold"
ACTIONS = (SEARCH, ADD, FORGET, PURGE, HOLD)
WILDCARDS = frozenset("*?[")
MAX_TAG_LENGTH = 200


def owner_tag(owner: str) -> str:
    """The tag written on every document and store a principal with an owner id creates."""
    return f"owner:{owner}"


def share_tag(object_id: str) -> str:
    """The tag ``share: {keys: [...]}`` writes on the object and grants to the keys named."""
    return f"share:{object_id}"


def validate_grants(value: Any) -> list[dict[str, Any]]:
    """``[{"pattern": str, "actions": [action, ...]}, ...]`` normalised; else VALIDATION_ERROR."""
    if value in (None, ""):
        return []
    if not isinstance(value, list):
        raise ValidationFailed("`grants` must be a list of {pattern, actions}.", details={"field": "grants"})
    grants = []
    for index, grant in enumerate(value):
        pattern = grant.get("pattern") if isinstance(grant, dict) else None
        actions = grant.get("actions") if isinstance(grant, dict) else None
        if (not isinstance(pattern, str) or not pattern.strip() or len(pattern) > MAX_TAG_LENGTH
                or not isinstance(actions, list) or not actions
                or any(a not in ACTIONS for a in actions)):
            raise ValidationFailed(
                f"grants[{index}] needs a `pattern` and `actions` from {', '.join(ACTIONS)}.",
                details={"field": f"grants[{index}]"})
        grants.append({"pattern": pattern.strip(), "actions": sorted(set(actions), key=ACTIONS.index)})
    return grants


@dataclass(frozen=True)
class Grants:
    """One principal's grants. ``restricted`` is False for an empty list: no narrowing."""

    owner: str
    grants: tuple[tuple[str, frozenset[str]], ...]

    @classmethod
    def of(cls, owner: str, grants: Any) -> Grants:
        rows = validate_grants(grants)
        return cls(owner, tuple((g["pattern"], frozenset(g["actions"])) for g in rows))

    @property
    def restricted(self) -> bool:
        return bool(self.grants)

    def patterns(self, action: str | None) -> list[str]:
        """The patterns granting ``action`` (None: any action)."""
        return [p for p, actions in self.grants if action is None or action in actions]

    def needs_catalogue(self, action: str | None) -> bool:
        """Whether a pattern has wildcards: the project's tags must then be matched against it."""
        return any(WILDCARDS & set(p) for p in self.patterns(action))

    def tags(self, action: str | None, catalogue: Iterable[str] = ()) -> list[str]:
        """The concrete tags ``action`` reaches: the owner tag (not for ``hold``), literal patterns
        and the tags of ``catalogue`` (the project's tags in use) that a wildcard pattern matches."""
        patterns = self.patterns(action)
        allowed = set() if action == HOLD else {owner_tag(self.owner)}
        allowed.update(p for p in patterns if not WILDCARDS & set(p))
        wild = [p for p in patterns if WILDCARDS & set(p)]
        allowed.update(t for t in catalogue if any(fnmatchcase(t, p) for p in wild))
        return sorted(allowed)

    def allows(self, action: str, object_tags: Iterable[str]) -> bool:
        """Whether the grants allow ``action`` on an object with these tags."""
        tags = list(object_tags)
        if action != HOLD and owner_tag(self.owner) in tags:
            return True
        return any(fnmatchcase(t, p) for p in self.patterns(action) for t in tags)
