"""What an erasure removes, counted in SQL before anything is deleted.

Deleting a store or a project cascades through memories, their contents and the ledger
(thousands of rows). The admin's confirmation page needs the counts per model and whether
anything would block the deletion, without loading every row the way Django's stock
deletion collector does. :func:`erasure_plan` follows the same ``on_delete`` rules as the
collector: ``CASCADE`` relations are removed with their parent, ``PROTECT`` and
``RESTRICT`` rows outside the erased set block it; ``SET_NULL``, ``SET_DEFAULT`` and
``DO_NOTHING`` relations (e.g. an assertion's generation and rule) are left alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from graphlib import TopologicalSorter
from typing import Any

from django.db import models
from django.db.models import Model, Q, QuerySet

BLOCKING = (models.PROTECT, models.RESTRICT)


@dataclass(frozen=True)
class ErasurePlan:
    """Rows an erasure removes and rows that would stop it, per model (non-zero counts only)."""

    removed: dict[type[Model], int]
    blocking: dict[type[Model], int]
    #: Rows under legal hold (``retention_class``) the erasure would remove: they refuse it.
    held: dict[type[Model], int] = field(default_factory=dict)


def _reverse_relations(model: type[Model]) -> list[Any]:
    """Foreign keys (and one-to-ones) pointing at ``model``; many-to-many links are rows of
    auto-created tables that go with either side, not things an operator erases."""
    return [rel for rel in model._meta.related_objects if not rel.many_to_many and rel.field.concrete]


def _rows_pointing_at(rel: Any, parents: QuerySet[Any]) -> Q:
    field = rel.field
    return Q(**{f"{field.attname}__in": parents.values(field.target_field.attname)})


def erasure_plan(*, queryset: QuerySet[Any]) -> ErasurePlan:
    """Counts per model of what deleting ``queryset`` removes, and what would block it."""
    erased = _cascade(queryset)
    removed = {model: rows.count() for model, rows in erased.items()}
    held = {model: count for model, rows in erased.items()
            if any(f.name == "retention_class" for f in model._meta.concrete_fields)
            and (count := rows.filter(retention_class="legal_hold").count())}
    return ErasurePlan(removed={m: n for m, n in removed.items() if n}, blocking=_blocking(erased), held=held)


def _cascade(queryset: QuerySet[Any]) -> dict[type[Model], QuerySet[Any]]:
    """The rows deleting ``queryset`` removes, per model, through every CASCADE."""
    # The cascade graph, parents before children. A model reached by several paths (an
    # assertion via its store, its memory and the memory it replaced) is counted once.
    parents: dict[type[Model], set[type[Model]]] = {queryset.model: set()}
    edges: dict[type[Model], list[tuple[Any, type[Model]]]] = {}
    pending = [queryset.model]
    while pending:
        parent = pending.pop()
        for rel in _reverse_relations(parent):
            child = rel.related_model
            if rel.on_delete is not models.CASCADE or child is parent:
                continue
            edges.setdefault(child, []).append((rel, parent))
            if child not in parents:
                parents[child] = set()
                pending.append(child)
            parents[child].add(parent)
    erased: dict[type[Model], QuerySet[Any]] = {}
    for model in TopologicalSorter(parents).static_order():
        if model is queryset.model:
            erased[model] = queryset
            continue
        condition = Q()
        for rel, parent in edges[model]:
            condition |= _rows_pointing_at(rel, erased[parent])
        erased[model] = model._base_manager.filter(condition)
    return erased


def _blocking(erased: dict[type[Model], QuerySet[Any]]) -> dict[type[Model], int]:
    """Rows outside the cascade that point at erased rows through a relation that blocks a delete."""
    blocking: dict[type[Model], int] = {}
    for model, rows in erased.items():
        for rel in _reverse_relations(model):
            if rel.on_delete not in BLOCKING:
                continue
            child = rel.related_model
            blockers = child._base_manager.filter(_rows_pointing_at(rel, rows))
            if child in erased:
                blockers = blockers.exclude(pk__in=erased[child].values("pk"))
            if count := blockers.count():
                blocking[child] = blocking.get(child, 0) + count
    return blocking
