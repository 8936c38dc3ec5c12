"""factory-boy factories for the models tests touch most."""

from __future__ import annotations

import factory

from memory_engine.models import Agent, MemoryStore, Project
from memory_engine.services.keys import api_key_create


class ProjectFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Project

    name = factory.Sequence(lambda n: f"project-{n}")


class MemoryStoreFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = MemoryStore

    project = factory.SubFactory(ProjectFactory)
    name = factory.Sequence(lambda n: f"store-{n}")


class AgentFactory(factory.django.DjangoModelFactory):
    """An agent row. ``access_tags=[...]`` also makes its own (agent-tier) store with those grant
    tags, as agent_create does: a principal narrowed by grants reaches the agent through them."""

    class Meta:
        model = Agent
        skip_postgeneration_save = True

    project = factory.SubFactory(ProjectFactory)
    name = factory.Sequence(lambda n: f"agent-{n}")

    @factory.post_generation
    def access_tags(self, create: bool, extracted: list[str] | None, **kwargs: object) -> None:
        if create and extracted is not None:
            from memory_engine.services.stores import agent_store_create

            store = agent_store_create(agent=self, owner=None)
            MemoryStore.objects.filter(pk=store.pk).update(access_tags=list(extracted))


def make_key(project: Project, *, read_only: bool = False) -> str:
    """A new raw API key for the project."""
    return api_key_create(project=project, read_only=read_only)[1]
