"""manage.py memory_engine_classify_consent: the classifier over stored memories (rows older than
consent categories start as memory:context), with their stored vectors, raising only."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from memory_engine.consent_categories import ConsentCategory
from memory_engine.models import Memory, Project
from memory_engine.services.memories import memory_write
from tests.factories import MemoryStoreFactory

pytestmark = pytest.mark.django_db


def test_stored_memories_are_raised_never_lowered(project: Project, other_project: Project) -> None:
    store = MemoryStoreFactory(project=project)
    other = MemoryStoreFactory(project=other_project)
    texts = {"iban": "Her IBAN is NL91 ABNA 0417 1643 00.",
             "grief": "She has been seeing a counsellor since the funeral and barely sleeps.",
             "task": "The release of the billing service is planned for Friday.",
             "held": "The user likes jazz."}
    ids = {name: memory_write(store=store, content=text, principal="test").memory.pk for name, text in texts.items()}
    foreign = memory_write(store=other, content="His IBAN is DE89 3704 0044 0532 0130 00.", principal="test").memory
    # as rows written before consent categories: all context, one an operator already placed higher
    Memory.objects.filter(store__in=[store, other]).update(consent_category=ConsentCategory.CONTEXT)
    Memory.objects.filter(pk=ids["held"]).update(consent_category=ConsentCategory.HEALTH)
    out = StringIO()
    call_command("memory_engine_classify_consent", "--project", project.pk, stdout=out)
    got = dict(Memory.objects.filter(store=store).values_list("pk", "consent_category"))
    assert got[ids["iban"]] == ConsentCategory.IDENTITY
    assert got[ids["grief"]] == ConsentCategory.HEALTH  # the embedding pass, on the stored vector
    assert got[ids["task"]] == ConsentCategory.CONTEXT
    assert got[ids["held"]] == ConsentCategory.HEALTH  # never lowered
    assert Memory.objects.get(pk=foreign.pk).consent_category == ConsentCategory.CONTEXT  # another project
    assert "read: 4" in out.getvalue() and "memory:identity 1" in out.getvalue()
    call_command("memory_engine_classify_consent", "--store", other.pk, stdout=StringIO())
    assert Memory.objects.get(pk=foreign.pk).consent_category == ConsentCategory.IDENTITY
