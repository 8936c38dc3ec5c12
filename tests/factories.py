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
    class Meta:
        model = Agent

    project = factory.SubFactory(ProjectFactory)
    name = factory.Sequence(lambda n: f"agent-{n}")


def make_key(project: Project, *, read_only: bool = False) -> str:
    """A new raw API key for the project."""
    return api_key_create(project=project, read_only=read_only)[1]
