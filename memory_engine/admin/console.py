"""The operator console's custom admin views: project overview, search playground,
ingestion-rule tester and memory-rule dry run.

Each view is mounted by a ModelAdmin's ``get_urls`` (so it lives under the stock admin,
behind ``admin_view``), checks Django model permissions with :func:`require_perm` and
sees only the user's projects through :mod:`.scoping`. All work goes through the same
services and selectors as the API.
"""

from __future__ import annotations

import json
from datetime import timedelta
from fnmatch import fnmatchcase
from typing import Any, cast

from django import forms
from django.contrib import admin
from django.db.models import Count, OuterRef, Q
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.utils import timezone

from memory_engine.conf import SEARCH_KNOBS
from memory_engine.db import SubqueryCount
from memory_engine.exceptions import MemoryEngineError
from memory_engine.injection import knowledge_message
from memory_engine.jsonobject import parse_json_object
from memory_engine.models import (
    Chunk,
    Document,
    Generation,
    IngestionRule,
    Memory,
    MemoryAssertion,
    MemoryRule,
    MemoryStore,
    Project,
)
from memory_engine.models.documents import DocumentStatus
from memory_engine.models.memories import Mechanism, Outcome
from memory_engine.redaction import converter_target
from memory_engine.selectors.search import SearchRequest, knowledge_search
from memory_engine.services.documents import chunking_label, resolve_chunking
from memory_engine.services.ingestion_rules import glob_specificity, rule_for_content_type
from memory_engine.services.rules import memory_rule_dry_run

from .next_steps import NEXT_STEPS
from .scoping import admin_access_tags, require_perm, scope_queryset, scoped_project_or_404, visible_projects

#: Documents are listed worst first on the overview.
STATUS_ORDER = [DocumentStatus.FAILED, DocumentStatus.PROCESSING, DocumentStatus.PENDING, DocumentStatus.READY]


def render_console(model_admin: admin.ModelAdmin, request: HttpRequest, template: str, title: str,
                   **context: Any) -> HttpResponse:
    """Render a console page inside the stock admin chrome (header, sidebar, breadcrumbs)."""
    base = {**model_admin.admin_site.each_context(request), "title": title, "opts": model_admin.model._meta}
    return render(request, f"admin/memory_engine/console/{template}", {**base, **context})


# --------------------------------------------------------------------------- overview


def project_overview(project: Any, *, now: Any = None, access_tags: list[str] | None = None) -> dict[str, Any]:
    """Everything the overview page shows about one project (read-only queries); with
    ``access_tags`` (a staff user with grants) only about the stores and documents they reach."""
    since = (now or timezone.now()) - timedelta(hours=24)
    granted = Q() if access_tags is None else Q(access_tags__overlap=access_tags)
    granted_stores = MemoryStore.objects.filter(granted, project=project)
    memories = Memory.objects.filter(store=OuterRef("pk"), project=project)
    stores = granted_stores.annotate(
        valid=SubqueryCount(memories.filter(invalidated_at__isnull=True)),
        invalidated=SubqueryCount(memories.filter(invalidated_at__isnull=False)),
        unembedded=SubqueryCount(memories.filter(invalidated_at__isnull=True, content__embedding__isnull=True)),
    ).order_by("name")
    recent = MemoryAssertion.objects.filter(store__in=granted_stores, created_at__gte=since)
    by_outcome = dict(recent.values_list("outcome").annotate(n=Count("id")).values_list("outcome", "n"))
    by_door = dict(recent.values_list("mechanism").annotate(n=Count("id")).values_list("mechanism", "n"))
    documents = Document.objects.filter(granted, project=project)
    by_status = dict(documents.values_list("status").annotate(n=Count("id")).values_list("status", "n"))
    failed = list(documents.filter(status=DocumentStatus.FAILED).order_by("-updated_at")[:20])
    rule_errors = list(
        Generation.objects.filter(project=project, extraction__icontains='"code"')
        .select_related("agent").order_by("-created_at")[:20]
    )
    return {
        "project": project,
        "stores": stores,
        "by_outcome": [(o, by_outcome.get(o, 0)) for o in Outcome.values],
        "by_door": [(m, by_door.get(m, 0)) for m in Mechanism.values],
        "recent_total": sum(by_outcome.values()),
        "by_status": [(s, by_status.get(s, 0)) for s in STATUS_ORDER],
        "failed": [(d, (d.error or {}).get("code", ""), NEXT_STEPS.get((d.error or {}).get("code", ""), ""))
                   for d in failed],
        "rule_errors": [(g, _rule_error_codes(g)) for g in rule_errors],
        "rule_firings": Generation.objects.filter(project=project, created_at__gte=since)
        .exclude(extraction={}).count(),
        "memories_missing_vector": sum(s.unembedded for s in stores),
        "chunks_missing_vector": Chunk.objects.filter(document__in=documents, embedding__isnull=True).count(),
    }


def _rule_error_codes(generation: Generation) -> list[tuple[str, str]]:
    return [(rule_id, f"{entry['error'].get('code')}: {entry['error'].get('message', '')}")
            for rule_id, entry in (generation.extraction or {}).items()
            if isinstance(entry, dict) and isinstance(entry.get("error"), dict)]


def overview_view(model_admin: admin.ModelAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    require_perm(request, "view_project")
    project = scoped_project_or_404(request, object_id)
    return render_console(model_admin, request, "overview.html", f"Overview: {project.name}",
                          **project_overview(project, access_tags=admin_access_tags(request)))


# --------------------------------------------------------------------------- search playground


class JSONObjectFormField(forms.CharField):
    """A JSON object typed into a text input (blank: None)."""

    def to_python(self, value: Any) -> Any:
        value = super().to_python(value)
        if not value:
            return None
        try:
            return parse_json_object(value)
        except json.JSONDecodeError:
            raise forms.ValidationError("Enter a JSON object, e.g. {\"kind\": \"preference\"}.") from None
        except ValueError:
            raise forms.ValidationError("Enter a JSON object.") from None


class StoreChoiceField(forms.ModelMultipleChoiceField):
    """Stores of several projects: each labelled with its project."""

    def label_from_instance(self, obj: Any) -> str:
        return f"{obj.project.name} / {obj.name}"


#: The search knobs the playground offers (blank: the search's default).
PLAYGROUND_KNOBS = ("limit", "rrf_k", "min_similarity", "recency_half_life_days")


def knob_form_field(name: str, **options: Any) -> forms.Field:
    """A search knob's playground field, derived from its declaration (memory_engine.conf.SEARCH_KNOBS):
    its type and range, checked by the form; blank is the knob's default (its setting's, if it has one)."""
    knob = SEARCH_KNOBS[name]

    def in_range(value: Any) -> None:
        if not knob.fits(value):
            raise forms.ValidationError(f"Enter {knob.expected}.")

    bounds = {"min": None if knob.low_open else knob.low, "max": knob.high}
    attrs = {key: f"{bound:g}" for key, bound in bounds.items() if bound is not None}
    field = forms.IntegerField if knob.kind is int else forms.FloatField
    blank = f"the {knob.setting} setting" if knob.setting else ("none" if knob.default is None else knob.default)
    return field(required=False, initial=None if knob.setting else knob.default, validators=[in_range],
                 widget=forms.NumberInput(attrs={**attrs, "step": "1" if knob.kind is int else "any"}),
                 help_text=f"{knob.expected.capitalize()}; blank: {blank}.", **options)


class PlaygroundForm(forms.Form):
    project = forms.ModelChoiceField(queryset=Project.objects.none())  # the visible ones: __init__
    query = forms.CharField(required=False, widget=forms.TextInput(attrs={"size": 80}))
    stores = StoreChoiceField(queryset=MemoryStore.objects.none(), required=False, label="Memory stores",
                              help_text="None: documents only (unless tags are set).")
    document_paths = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2, "cols": 60}),
                                     help_text="Path prefixes, one per line (e.g. /handbook/).")
    tags = JSONObjectFormField(required=False, help_text='Exact tag match, e.g. {"kind": "preference"}.')
    limit = knob_form_field("limit")
    rrf_k = knob_form_field("rrf_k", label="RRF k")
    min_similarity = knob_form_field("min_similarity")
    recency_half_life_days = knob_form_field("recency_half_life_days", label="Recency half-life (days)")
    channels = forms.MultipleChoiceField(choices=[("vector", "vector"), ("lexical", "lexical")], required=False,
                                         initial=["vector", "lexical"], widget=forms.CheckboxSelectMultiple)

    def __init__(self, *args: Any, request: HttpRequest, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # self.fields holds per-form copies of the fields declared above.
        cast(forms.ModelChoiceField, self.fields["project"]).queryset = visible_projects(request)
        stores = scope_queryset(
            request, MemoryStore.objects.select_related("project").order_by("project__name", "name"), "project")
        if (tags := admin_access_tags(request)) is not None:
            stores = stores.filter(access_tags__overlap=tags)
        cast(StoreChoiceField, self.fields["stores"]).queryset = stores


def playground_view(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    require_perm(request, "view_memory", "view_document")
    # A link may name just the project (?project=…): that pre-selects it; a query submits.
    submitted = "query" in request.GET
    form = PlaygroundForm(request.GET if submitted else None, request=request,
                          initial={"project": request.GET.get("project") or visible_projects(request).first()})
    context: dict[str, Any] = {"form": form}
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        try:
            result = knowledge_search(SearchRequest(
                project=data["project"], query=data["query"] or None,
                memory_store_ids=[s.pk for s in data["stores"]] or None,
                document_paths=[p.strip() for p in data["document_paths"].splitlines() if p.strip()] or None,
                tags=data["tags"], **{name: data[name] for name in PLAYGROUND_KNOBS if data[name] is not None},
                channels=tuple(data["channels"]) or ("vector", "lexical"),
                access_tags=admin_access_tags(request),
            ))
        except MemoryEngineError as exc:
            context["error"] = f"{exc.code}: {exc.message}"
        else:
            # What push injection would hand on: the relevant hits only (it searches with the
            # agent's min_relevance; here, the deployment's SEARCH_MIN_RELEVANCE).
            message = knowledge_message([hit for hit in result.results if hit.relevant], result.evidence)
            context.update(result=result, knowledge=message["content"] if message else "")
    return render_console(model_admin, request, "playground.html", "Search playground", **context)


# --------------------------------------------------------------------------- ingestion rule tester


class RuleTesterForm(forms.Form):
    project = forms.ModelChoiceField(queryset=Project.objects.none())  # the visible ones: __init__
    content_type = forms.CharField(initial="application/pdf", help_text="e.g. application/pdf, text/markdown.")

    def __init__(self, *args: Any, request: HttpRequest, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ModelChoiceField, self.fields["project"]).queryset = visible_projects(request)


def ingestion_rule_tester_view(model_admin: admin.ModelAdmin, request: HttpRequest) -> HttpResponse:
    """Which ingestion rule wins for content type X (and the chunking a document would get)."""
    require_perm(request, "view_ingestionrule")
    form = RuleTesterForm(request.GET if "content_type" in request.GET else None, request=request,
                          initial={"project": request.GET.get("project") or visible_projects(request).first()})
    context: dict[str, Any] = {"form": form}
    if form.is_bound and form.is_valid():
        project, content_type = form.cleaned_data["project"], form.cleaned_data["content_type"].strip().lower()
        winner = rule_for_content_type(project=project, content_type=content_type)
        rules = sorted(IngestionRule.objects.filter(project=project),
                       key=lambda r: (glob_specificity(r.content_type_glob), r.created_at))
        context.update(
            tested=content_type, winner=winner, winner_target=converter_target(winner) if winner else "",
            rules=[(r, fnmatchcase(content_type, r.content_type_glob)) for r in rules],
            chunking=chunking_label(*resolve_chunking(requested={}, rule=winner, content_type=content_type)),
        )
    return render_console(model_admin, request, "rule_tester.html", "Which ingestion rule wins?", **context)


# --------------------------------------------------------------------------- memory rule dry run


class DryRunForm(forms.Form):
    transcript = forms.CharField(widget=forms.Textarea(attrs={"rows": 10, "cols": 100}),
                                 help_text="user: …\\n\\nassistant: … (as the rule's handler receives it).")


def dry_run_view(model_admin: admin.ModelAdmin, request: HttpRequest, object_id: str) -> HttpResponse:
    # The handler runs for real (an LLM, an HTTP call, a callable): changing the rule's right, not viewing.
    require_perm(request, "change_memoryrule", "view_memory")
    rule = scope_queryset(request, MemoryRule.objects.select_related("store__project"), "store__project") \
        .filter(pk=object_id).first()
    if rule is None:
        raise Http404("No such memory rule.")
    form = DryRunForm(request.POST or None)
    context: dict[str, Any] = {"form": form, "rule": rule}
    if request.method == "POST" and form.is_valid():
        context["outcome"] = memory_rule_dry_run(rule=rule, transcript=form.cleaned_data["transcript"])
    return render_console(model_admin, request, "dry_run.html", f"Dry run of memory rule {rule.pk}", **context)
