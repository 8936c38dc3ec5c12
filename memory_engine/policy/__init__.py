"""The one access policy (docs/security.md, *The access policy*).

Every door — REST views, MCP tools, agent tools, memory rules (acting as the principal that set
them up, checked again at each firing), the feed and webhooks, the admin, links, lineage, agents'
``knowledge_config``, erasure and receipts, management commands (the system principal) — asks
this package, and none keeps its own copy:

* :mod:`.principals`: who acts (:class:`Principal`: an API key, a staff user, a superuser, the system);
* :mod:`.decisions`: which rows a principal sees for an action (:func:`visible`, a filter inside
  the SQL), whether it may act on one object (:func:`allows`, :func:`require`), and who may use
  staged generations (:func:`require_generation_access`);
* :mod:`.legal_hold`: the one legal-hold check every delete and redaction path calls, and who
  may release a hold;
* :mod:`.tagging`: the grant tags a new document or store gets (owner, ``share``).

The grammar of grant lists (actions, patterns) is :mod:`memory_engine.grants`.
"""

from memory_engine.grants import ACTIONS, ADD, FORGET, HOLD, PURGE, SEARCH, Grants, owner_tag, share_tag

from .decisions import (
    GENERATION_PERMISSION,
    HOLD_PERMISSION,
    TAG_FILTERS,
    allows,
    get_visible_or_404,
    lookup_action,
    may_purge_project,
    object_tags,
    reach,
    receipts_visible,
    require,
    require_generation_access,
    require_unrestricted,
    sees,
    tag_filter,
    unrestricted_only,
    visible,
)
from .legal_hold import check_legal_hold, releases_hold, require_hold_release
from .principals import (
    SYSTEM,
    Principal,
    PrincipalKind,
    key_principal,
    principal_from_reference,
    system_principal,
    user_principal,
)
from .tagging import Share, access_tags_write, share_resolve

__all__ = [
    "ACTIONS",
    "ADD",
    "FORGET",
    "GENERATION_PERMISSION",
    "HOLD",
    "HOLD_PERMISSION",
    "PURGE",
    "SEARCH",
    "SYSTEM",
    "TAG_FILTERS",
    "Grants",
    "Principal",
    "PrincipalKind",
    "Share",
    "access_tags_write",
    "allows",
    "check_legal_hold",
    "get_visible_or_404",
    "key_principal",
    "lookup_action",
    "may_purge_project",
    "object_tags",
    "owner_tag",
    "principal_from_reference",
    "reach",
    "receipts_visible",
    "releases_hold",
    "require",
    "require_generation_access",
    "require_hold_release",
    "require_unrestricted",
    "sees",
    "share_resolve",
    "share_tag",
    "system_principal",
    "tag_filter",
    "unrestricted_only",
    "user_principal",
    "visible",
]
