"""Reads of resident distillers' runs as a principal sees them.

A distiller reads every document in its scope; whoever reads its runs may reach fewer. A run's
errors name document versions and memories (``version_id``, ``memory_id``): to a principal
narrowed by grants (memory_engine.policy) a run lists only the errors whose named rows it may see,
so an id outside its grants answers exactly like one that never existed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from memory_engine.models import DocumentVersion, Memory
from memory_engine.policy import SEARCH, Principal, reach, visible

__all__ = ["run_errors_in_reach"]

#: The keys of a run's error that name a row, and the row's model.
NAMED_ROWS: dict[str, type[DocumentVersion] | type[Memory]] = {"version_id": DocumentVersion, "memory_id": Memory}


def run_errors_in_reach(caller: Principal, project_id: str,
                        runs_errors: Iterable[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """Each of project ``project_id``'s runs' ``errors`` (in order) less those naming a row
    ``caller`` may not see; unchanged for a principal not narrowed by grants."""
    runs_errors = [list(errors) for errors in runs_errors]
    if reach(caller, SEARCH) is None:
        return runs_errors
    seen: set[Any] = set()
    for name, model in NAMED_ROWS.items():
        ids = {error[name] for errors in runs_errors for error in errors if error.get(name)}
        if ids:
            rows = visible(caller, model._default_manager.filter(project_id=project_id, pk__in=ids), SEARCH)
            seen |= set(rows.values_list("pk", flat=True))
    return [[error for error in errors if all(error[name] in seen for name in NAMED_ROWS if error.get(name))]
            for errors in runs_errors]
