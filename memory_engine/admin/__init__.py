"""The operator console: stock Django admin, extended with what operators need to answer
"why was this fact retired?" and "why is this PDF not searchable?"."""

from . import memories, tenancy  # noqa: F401  (registers ModelAdmins)
from . import rules  # noqa: F401  (memory rules and generations)
from . import agents  # noqa: F401  (agents)
from . import documents  # noqa: F401  (documents and ingestion rules)
