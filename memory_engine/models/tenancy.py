"""Tenancy: projects (the tenant boundary) and their API keys."""

from __future__ import annotations

import functools
import hashlib
import hmac
import secrets
from typing import Any, cast

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models, router
from django.db.models.fields.related_descriptors import ForwardManyToOneDescriptor
from django.utils import timezone

from memory_engine.db import delete_in_project
from memory_engine.exceptions import ValidationFailed
from memory_engine.grants import validate_grants
from memory_engine.ids import PublicIdField

KEY_PREFIX = "me"


class Project(models.Model):
    """The tenant boundary: every row the API can reach belongs to exactly one project."""

    id = PublicIdField(prefix="prj")
    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True, default="")
    max_memories = models.PositiveIntegerField(
        null=True, blank=True, help_text="Override of MAX_MEMORIES_PER_PROJECT (valid memories)."
    )
    max_document_bytes = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="Override of MAX_DOCUMENT_BYTES_PER_PROJECT."
    )
    members = models.ManyToManyField(
        settings.AUTH_USER_MODEL,
        blank=True,
        related_name="memory_engine_projects",
        help_text="Staff users who may operate this project in the admin.",
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name


class ProjectRow:
    """A model whose rows belong to a project (``project_id``; each such table is distributed by
    it on a distributed PostgreSQL, docs/scaling.md). Django's own statements about one row name
    its project beside its id, so there they run on the project's node, not on every node:
    ``save()``'s ``UPDATE``, ``refresh_from_db()`` and ``delete()``
    (:func:`memory_engine.db.delete_in_project`); so do joins through a foreign key to another
    such model and reads of the parent it names (:func:`join_tenant_rows_by_project`). On one
    PostgreSQL the filter is redundant."""

    project_id: Any
    pk: Any

    def _do_update(self, base_qs: Any, using: Any, pk_val: Any, values: Any, update_fields: Any,
                   forced_update: Any) -> Any:
        if self.project_id is not None:
            base_qs = base_qs.filter(project_id=self.project_id)
        return super()._do_update(base_qs, using, pk_val, values, update_fields, forced_update)  # type: ignore[misc]

    def refresh_from_db(self, using: str | None = None, fields: Any = None, from_queryset: Any = None) -> None:
        if from_queryset is None and self.project_id is not None:
            manager = type(self)._base_manager.db_manager(using, hints={"instance": self})  # type: ignore[attr-defined]
            from_queryset = manager.filter(project_id=self.project_id)
        super().refresh_from_db(using=using, fields=fields, from_queryset=from_queryset)  # type: ignore[misc]

    def delete(self, using: str | None = None, keep_parents: bool = False) -> tuple[int, dict[str, int]]:
        if self.project_id is None or self.pk is None:
            return super().delete(using=using, keep_parents=keep_parents)  # type: ignore[misc]
        using = using or router.db_for_write(type(self), instance=self)  # type: ignore[arg-type]
        rows = type(self)._base_manager.using(using).filter(pk=self.pk)  # type: ignore[attr-defined]
        deleted = delete_in_project(rows, self.project_id)
        self.pk = None  # as Django's delete leaves it
        return deleted


def _joined_by_project(field: models.ForeignKey, alias: str | None, related_alias: str | None) -> Any:
    """The condition a join through ``field`` adds to its ``ON`` clause: the two rows' projects
    are equal (``alias`` is the referenced table's, ``related_alias`` the referencing one's)."""
    if alias is None or related_alias is None:  # a subquery's pushed-down start: no second table
        return None
    from django.db.models.expressions import Col
    from django.db.models.lookups import Exact
    from django.db.models.sql.where import AND, WhereNode

    referencing = cast(models.Field, field.model._meta.get_field("project"))
    referenced = cast(models.Field, cast(type[models.Model], field.related_model)._meta.get_field("project"))
    equal: Any = Exact(Col(related_alias, referencing), Col(alias, referenced))
    return WhereNode([equal], connector=AND)


class _ReadByProject:
    """Mixed into the descriptor Django gives a foreign key (or one-to-one): ``row.parent`` is
    read by its id and the row's project."""

    def get_queryset(self, **hints: Any) -> Any:
        rows = super().get_queryset(**hints)  # type: ignore[misc]
        project_id = getattr(hints.get("instance"), "project_id", None)
        return rows if project_id is None else rows.filter(project_id=project_id)


_BY_PROJECT: dict[str, type[ForwardManyToOneDescriptor]] = {}


def _by_project(descriptor: type[ForwardManyToOneDescriptor]) -> type[ForwardManyToOneDescriptor]:
    """``descriptor`` reading by the project (one class per kind of descriptor)."""
    name = f"{descriptor.__name__}ByProject"
    if name not in _BY_PROJECT:
        _BY_PROJECT[name] = type(name, (_ReadByProject, descriptor), {})
    return _BY_PROJECT[name]


def join_tenant_rows_by_project(all_models: Any) -> int:
    """Make every foreign key between two :class:`ProjectRow` models name the project (the
    foreign keys are composite in the database, migration 0030): a statement that joins them (a
    ``select_related``, a filter through a relation, in either direction) joins on ``project_id``
    too, and ``row.parent`` is read by its id and the row's project. On a distributed PostgreSQL
    that is what lets a join run on the nodes that hold the rows (a join by id alone is refused
    there) and a parent be read on one node (docs/scaling.md); on one PostgreSQL it is
    redundant. The number of foreign keys made so. Called once, from ``AppConfig.ready``."""
    made = 0
    for model in all_models:
        if not issubclass(model, ProjectRow):
            continue
        for field in model._meta.local_fields:
            if (isinstance(field, models.ForeignKey) and not isinstance(field, TenantProjectField)
                    and isinstance(field.related_model, type) and issubclass(field.related_model, ProjectRow)):
                field.get_extra_restriction = functools.partial(_joined_by_project, field)  # type: ignore[attr-defined]
                descriptor: type[ForwardManyToOneDescriptor] = type(getattr(model, field.name))
                setattr(model, field.name, _by_project(descriptor)(field))
                made += 1
    return made


class TenantProjectField(models.ForeignKey):
    """The project of a row whose parent (``Model.tenant_parent``: its store, document, rule,
    subscription) already names it: the distribution column on a distributed PostgreSQL
    (docs/scaling.md, *A distributed PostgreSQL (Citus)*). Filled from the parent when a writer
    leaves it empty: on save and on the engine's own inserts here (from the parent object when it
    is loaded, else with one query), and for raw SQL by a ``BEFORE INSERT`` trigger (migration
    0021). Unindexed (reads go through the parent) and not collected by Django's cascade (the
    parent's cascade deletes the row)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("to", "memory_engine.Project")
        kwargs.setdefault("on_delete", models.DO_NOTHING)
        kwargs.setdefault("related_name", "+")
        kwargs.setdefault("db_index", False)
        super().__init__(*args, **kwargs)

    def pre_save(self, model_instance: models.Model, add: bool) -> Any:
        if getattr(model_instance, self.attname) is None:
            setattr(model_instance, self.attname, parent_project_id(model_instance))
        return super().pre_save(model_instance, add)


def parent_project_id(row: models.Model) -> str | None:
    """The project of ``row``'s parent (``tenant_parent``), None when it has none yet."""
    parent: Any = type(row)._meta.get_field(type(row).tenant_parent)  # type: ignore[attr-defined]
    if parent.is_cached(row):
        found = getattr(row, parent.name)
        return None if found is None else found.project_id
    parent_id = getattr(row, parent.attname)
    if parent_id is None:
        return None
    return parent.related_model._default_manager.filter(pk=parent_id).values_list("project_id", flat=True).first()


def hash_key(raw_key: str) -> str:
    """Keys carry 256 bits of randomness, so one round of SHA-256 is enough at rest."""
    return hashlib.sha256(raw_key.encode()).hexdigest()


class ApiKey(models.Model):
    """A bearer key for one project. Only its hash is stored; the secret is shown once."""

    id = PublicIdField(prefix="key")
    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=200, blank=True, default="")
    prefix = models.CharField(max_length=16, unique=True, editable=False)
    hashed_key = models.CharField(max_length=64, editable=False)
    read_only = models.BooleanField(default=False)
    grants = models.JSONField(
        default=list, blank=True,
        help_text='Access inside the project: [{"pattern": "team:*", "actions": ["search", "add"]}]. '
                  "Empty: the whole project.",
    )
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API key"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.project})"

    @staticmethod
    def generate() -> tuple[str, str]:
        """Return (prefix, raw key). The raw key is ``me_<prefix>_<secret>``."""
        prefix = secrets.token_hex(4)
        return prefix, f"{KEY_PREFIX}_{prefix}_{secrets.token_urlsafe(32)}"

    def clean(self) -> None:
        try:
            self.grants = validate_grants(self.grants)
        except ValidationFailed as error:
            raise ValidationError({"grants": error.message}) from None

    def matches(self, raw_key: str) -> bool:
        return hmac.compare_digest(self.hashed_key, hash_key(raw_key))

    @property
    def is_active(self) -> bool:
        now = timezone.now()
        return self.revoked_at is None and (self.expires_at is None or self.expires_at > now)


class StaffGrants(models.Model):
    """Grants of one staff user, in every project the user operates (docs/security.md, *Access
    inside a project*). Same format and opt-in as :attr:`ApiKey.grants`: no row, or an empty list,
    keeps the user's whole projects; a superuser is never narrowed."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE,
                                related_name="memory_engine_grants")
    grants = models.JSONField(
        default=list, blank=True,
        help_text='Access inside the user\'s projects: [{"pattern": "team:*", "actions": ["search", "add"]}]. '
                  "Empty: the whole projects. Ignored for a superuser.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "staff grants"
        verbose_name_plural = "staff grants"

    def __str__(self) -> str:
        return f"grants of {self.user}"

    def clean(self) -> None:
        try:
            self.grants = validate_grants(self.grants)
        except ValidationFailed as error:
            raise ValidationError({"grants": error.message}) from None
