"""Deletion in the admin through the services.

Deleting a store or a project takes its ledger with it, which only the erasure services
(``memory_store_delete``, ``project_delete``) may do: they lift the ledger trigger for their
transaction. The stock admin deletion would call ``Model.delete()`` directly (the trigger
refuses it) and, before that, demand delete permission on every related model, which the
ledger and memories admins never grant (they are removed only by erasure). Here the
permission that counts is delete permission on the erased object itself, and the
confirmation page shows per-model counts (:func:`~memory_engine.selectors.erasure.erasure_plan`)
instead of listing every row. Documents use it too (``document_delete`` also removes the
stored file, and a document's thousands of chunks are counted, not listed).
"""

from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.contrib.admin.utils import model_ngettext
from django.db import transaction
from django.db.models import Model, QuerySet
from django.http import HttpRequest
from django.utils.text import capfirst

from memory_engine.grants import PURGE
from memory_engine.selectors.erasure import erasure_plan


class ErasureAdmin(admin.ModelAdmin):
    """A ModelAdmin whose deletions (delete view and bulk action) go through :meth:`erase`."""

    def erase(self, request: HttpRequest, obj: Any) -> None:
        raise NotImplementedError(".erase() must be overridden")

    def delete_model(self, request: HttpRequest, obj: Any) -> None:
        self._require_purge(request, [obj])
        self.erase(request, obj)

    def delete_queryset(self, request: HttpRequest, queryset: QuerySet[Any]) -> None:
        self._require_purge(request, queryset)
        with transaction.atomic():  # all selected rows, or none
            for obj in queryset:
                self.erase(request, obj)

    def _require_purge(self, request: HttpRequest, objs: Any) -> None:
        """A staff user with grants erases only rows a ``purge`` grant reaches (403 otherwise)."""
        require_grant = getattr(self, "require_grant", None)  # ProjectScopedAdmin's, on grant-tagged models
        if require_grant is not None:
            require_grant(request, PURGE, objs)

    def get_deleted_objects(self, objs: Any, request: HttpRequest) -> tuple[list[str], dict[str, int], set[str],
                                                                             list[str]]:
        """The objects to delete, per-model counts of what goes with them, no permission
        demanded beyond the erased model's own, and what blocks the erasure (if anything)."""
        objs = list(objs)
        plan = erasure_plan(queryset=self.model._base_manager.filter(pk__in=[obj.pk for obj in objs]))
        to_delete = [f"{capfirst(self.opts.verbose_name)}: {obj}" for obj in objs]
        model_count = {_plural(model): count for model, count in plan.removed.items()}
        protected = [f"Referenced by {count} {model_ngettext(model._meta, count)} outside this deletion"
                     for model, count in plan.blocking.items()]
        protected += [f"{count} {model_ngettext(model._meta, count)} under legal hold (LEGAL_HOLD)"
                      for model, count in plan.held.items()]
        return to_delete, model_count, set(), protected


def _plural(model: type[Model]) -> str:
    return str(model._meta.verbose_name_plural)
