"""Two projects with data of every kind, built through the services (hardening suites)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from django.conf import settings as django_settings
from django.test import override_settings

from memory_engine.models import Chunk, DocumentVersion, Entity, Memory, MemoryAssertion, Project, RawCapture
from memory_engine.models.memories import Mechanism
from memory_engine.policy import SYSTEM, system_principal
from memory_engine.services.agents import agent_create
from memory_engine.services.distillers import distiller_create
from memory_engine.services.documents import document_capture_text, document_create_text, document_ingest
from memory_engine.services.documents.replay import replay_run, transform_config_create
from memory_engine.services.entities import entities_extract_documents, entities_extract_memories
from memory_engine.services.erasure import subject_erase
from memory_engine.services.generations import record_generation
from memory_engine.services.ingestion_rules import ingestion_rule_save
from memory_engine.services.links import evidence_link_create, link_end
from memory_engine.services.memories import memory_write
from memory_engine.services.rules import memory_rule_create
from memory_engine.services.stores import subject_store_get_or_create
from memory_engine.webhooks import webhook_create

from ..factories import MemoryStoreFactory, ProjectFactory, make_key

#: An unroutable local URL: rules and converters pointing here are never called by these suites.
DEAD_URL = "http://127.0.0.1:9/never"


@dataclass
class World:
    """One project's rows by kind (``ids[kind]`` lists public ids), its keys and a marker
    string that appears in its texts, paths and tags."""

    project: Project
    marker: str
    key: str
    readonly_key: str
    ids: dict[str, list[str]] = field(default_factory=dict)

    def first(self, kind: str) -> str:
        return self.ids[kind][0]

    def all_ids(self) -> set[str]:
        return {value for values in self.ids.values() for value in values} | {self.project.pk}


def build_world(label: str, *, project: Project | None = None, external_ref: str = "shared/ref-1") -> World:
    """A project with stores, memories (one superseded), assertions, a document with chunks,
    an ingestion rule, agents, generations (running and completed) and a memory rule. With
    ``project``, the rows go into that project (two principals of one project)."""
    marker = f"{label}{uuid.uuid4().hex[:10]}"
    project = project or ProjectFactory(name=f"project-{marker}")
    store = MemoryStoreFactory(project=project, name=f"store-{marker}", tags={"team": marker})
    store2 = MemoryStoreFactory(project=project, name=f"store2-{marker}")
    principal = f"test:{marker}"
    first = memory_write(store=store, content=f"The {marker} deployment region is eu-west-1.",
                         principal=principal, mechanism=Mechanism.API, tags={"team": marker})
    memory_write(store=store, content=f"The {marker} deployment region is us-east-2.",
                 principal=principal, mechanism=Mechanism.API, about={"kind": "region", "key": marker})
    # Two entities only this world names (a name of letters from the marker): the graph's rows.
    person, place = name_from(marker[-5:], "var"), name_from(marker[-10:-5], "ton")
    memory_write(store=store2, content=f"{marker} prefers tea over coffee, says {person}.", principal=principal,
                 mechanism=Mechanism.API)
    document = document_create_text(project=project,
                                    content=f"# {marker}\n\nThe {marker} handbook says hello to {place}.",
                                    content_type="text/markdown", path=f"/{marker}/handbook.md",
                                    tags={"team": marker}, enqueue=False)
    document_ingest(document_id=document.pk)
    # A captured source under the identity both worlds use (OWN_NAMES in the matrix).
    captured = document_capture_text(project=project, content=f"The {marker} wiki page.", source="wiki",
                                     external_ref=external_ref, enqueue=False).document
    document_ingest(document_id=captured.pk)
    ingestion_rule = ingestion_rule_save(project=project, name=f"rule-{marker}",
                                         content_type_glob=f"application/x-hardening-{label}",
                                         converter_type="http", converter_url=DEAD_URL,
                                         converter_secret=f"conv-secret-{marker}")
    agent = agent_create(project=project, name=f"agent-{marker}",
                         knowledge_config={"memory_store_ids": [store.pk], "document_ids": [document.pk]},
                         write_memory_store_id=store.pk, caller=SYSTEM)
    agent2 = agent_create(project=project, name=f"agent2-{marker}", caller=SYSTEM)
    running = record_generation(agent=agent, input_messages=[{"role": "user", "content": f"hi {marker}"}])
    completed = record_generation(agent=agent, input_messages=[{"role": "user", "content": marker}],
                                  output=f"reply {marker}", status="completed", initiator=running)
    # Created after the generations completed, so nothing fires during setup.
    rule = memory_rule_create(store=store, handler_type="http",
                              handler_config={"url": DEAD_URL, "secret": f"rule-secret-{marker}"},
                              source_agent_ids=[agent.pk], caller=SYSTEM)
    # A subject id is a name inside its project (no marker: another project may use it too).
    subject = f"subject-{label}"
    subject_store = subject_store_get_or_create(project=project, external_id=subject)[0]
    receipt = subject_erase(project=project, caller=system_principal(marker), tags={"erase": "nothing"})
    config = transform_config_create(project=project, name=f"config-{marker}")
    replay = replay_run(config=config, started_by=principal)
    distiller = distiller_create(store=store, caller=SYSTEM, document_paths=[f"/{marker}/"])
    webhook = webhook_create(project=project, url=f"http://127.0.0.1:9/hook-{marker}",
                             caller=system_principal(marker))
    assert replay.status == "completed", replay.error
    stores = [store, store2, subject_store]
    # names resolve by key only here: the test embedder's vectors of two made-up names can be close
    with override_settings(MEMORY_ENGINE={**django_settings.MEMORY_ENGINE, "ENTITY_RESOLUTION_SIMILARITY": 0}):
        entities_extract_memories(memory_ids=list(Memory.objects.filter(store__in=stores)
                                                  .values_list("pk", flat=True)))
        entities_extract_documents(document_ids=[document.pk, captured.pk])
    entities = [Entity.objects.get(project=project, key=name.lower()).pk for name in (person, place)]
    linked = list(Memory.objects.filter(store=store).order_by("created_at").values_list("pk", flat=True)[:2])
    link = evidence_link_create(project=project, kind="supports", created_by=principal,
                                source=link_end(project=project, end_id=linked[0], field="source_id"),
                                target=link_end(project=project, end_id=linked[1], field="target_id"))
    ids = {
        "project": [project.pk],
        "store": [store.pk, store2.pk, subject_store.pk],
        "subject": [subject],
        "memory": list(Memory.objects.filter(store__in=stores).order_by("created_at")
                       .values_list("pk", flat=True)),
        "assertion": list(MemoryAssertion.objects.filter(store__in=stores).values_list("pk", flat=True)),
        "document": [document.pk],
        "captured_document": [captured.pk],
        "chunk": list(Chunk.objects.filter(document=document).values_list("pk", flat=True)),
        "document_version": list(DocumentVersion.objects.filter(document=document).values_list("pk", flat=True)),
        "ingestion_rule": [ingestion_rule.pk],
        "agent": [agent.pk, agent2.pk],
        "generation": [running.pk, completed.pk],
        "memory_rule": [rule.pk],
        "erasure_receipt": [receipt.pk],
        "transform_config": [config.pk],
        "replay_run": [replay.pk],
        "webhook": [webhook.pk],
        "distiller": [distiller.pk],
        "link": [link.pk],
        "entity": entities,
        "content": list(Memory.objects.filter(store__in=stores).values_list("content_id", flat=True)),
    }
    assert first.action == "created"
    return World(project=project, marker=marker, key=make_key(project),
                 readonly_key=make_key(project, read_only=True), ids=ids)


def name_from(digits: str, ending: str) -> str:
    """A capitalised word of letters made from hex digits of the marker ("Kbdafvar"): a name the
    entity extractor reads (no common-word ending), unique to one world."""
    return "".join(chr(ord("a") + int(c, 16)) for c in digits).capitalize() + ending


def counts(world: World) -> dict[str, int]:
    """Row counts of the project's data (to prove a refused call changed nothing)."""
    from memory_engine.models import (
        Agent,
        Distiller,
        Document,
        EvidenceLink,
        Generation,
        IngestionRule,
        MemoryRule,
        MemoryStore,
        ReplayRun,
        TransformConfig,
        WebhookSubscription,
    )

    project = world.project
    return {
        "stores": MemoryStore.objects.filter(project=project).count(),
        "valid_memories": Memory.objects.filter(store__project=project, invalidated_at__isnull=True).count(),
        "assertions": MemoryAssertion.objects.filter(store__project=project).count(),
        "documents": Document.objects.filter(project=project).count(),
        "chunks": Chunk.objects.filter(document__project=project).count(),
        "document_versions": DocumentVersion.objects.filter(document__project=project).count(),
        "raw_captures": RawCapture.objects.filter(project=project).count(),
        "ingestion_rules": IngestionRule.objects.filter(project=project).count(),
        "agents": Agent.objects.filter(project=project).count(),
        "generations": Generation.objects.filter(project=project).count(),
        "running_generations": Generation.objects.filter(project=project, status="running").count(),
        "memory_rules": MemoryRule.objects.filter(store__project=project).count(),
        "transform_configs": TransformConfig.objects.filter(project=project).count(),
        "promoted_replay_runs": ReplayRun.objects.filter(project=project, status="promoted").count(),
        "webhooks": WebhookSubscription.objects.filter(project=project).count(),
        "distillers": Distiller.objects.filter(project=project).count(),
        "links": EvidenceLink.objects.filter(project=project).count(),
        "entities": Entity.objects.filter(project=project).count(),
    }


def leaks(payload: Any, world: World, *, sent: tuple[str, ...] = ()) -> list[str]:
    """Ids or the marker of ``world`` found anywhere in a response body (the ids the caller
    sent itself may be echoed back)."""
    text = payload if isinstance(payload, str) else repr(payload)
    found = sorted(i for i in world.all_ids() - set(sent) if i in text)
    if world.marker in text:
        found.append(f"marker {world.marker}")
    return found


def api_key_header(raw_key: str) -> dict[str, str]:
    return {"HTTP_AUTHORIZATION": f"Bearer {raw_key}"}


def nonexistent_id(prefix_of: str) -> str:
    """A well-formed id with the same prefix as ``prefix_of`` that names no row."""
    prefix = prefix_of.split("_", 1)[0]
    return f"{prefix}_{'0' * 10}{uuid.uuid4().hex[:16]}"
