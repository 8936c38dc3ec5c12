"""The memory map (docs/memory.md, *The memory map*): every live memory a point, clusters with
labels, sensitive points masked for every principal and in the admin's picture, the map going
with its store (400 UNKNOWN_SCOPE otherwise), cached and computed again when the store
changed enough; a large store's first map comes from a real django-q2 worker."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from typing import Any

import numpy as np
import pytest
from django.contrib.auth.models import Permission, User
from django.db import connection
from django.test import Client
from django.utils import timezone

from memory_engine.consent_categories import ConsentCategory
from memory_engine.models import Memory, MemoryMap, MemoryStore, Project
from memory_engine.projection import choose_k, cluster_labels, kmeans, layout_2d, pca_2d, trustworthiness
from memory_engine.services.keys import api_key_create
from memory_engine.services.memories import memory_write
from memory_engine.services.memory_lifecycle import memory_forget
from tests.conftest import api_client, wait_for
from tests.factories import MemoryStoreFactory, ProjectFactory, make_key

URL = "/api/v1/memory-map"

TOPICS = {
    "cooking": ["The user likes risotto with mushrooms.", "She bakes sourdough bread every weekend.",
                "He prefers olive oil over butter when cooking.", "The user's favourite dessert is tiramisu.",
                "She roasts vegetables with rosemary and garlic.", "He makes fresh pasta for dinner parties.",
                "The user loves spicy Thai green curry.", "She always adds basil to tomato sauce."],
    "infrastructure": ["The API runs on a Kubernetes cluster in eu-west-1.", "Deployments go out through ArgoCD.",
                       "The database is PostgreSQL 16 with pgvector.", "Nightly backups are stored in S3.",
                       "The cluster autoscaler adds nodes under load.", "Grafana dashboards watch the latency.",
                       "Terraform manages the cloud networking.", "The ingress controller terminates TLS."],
    "music": ["The user plays the cello in an amateur orchestra.", "She listens to Bach while working.",
              "He is learning jazz piano chords.", "The user went to a Radiohead concert.",
              "She sings in a choir on Thursdays.", "He collects vinyl records of soul music.",
              "The user practises scales on the violin daily.", "She prefers live albums to studio recordings."],
}
#: Sensitive memories with words that must never reach an answer (text, title or label).
SECRETS = [
    ("The user takes quetiapine for zebrafinch syndrome.", "Zebrafinch treatment", ConsentCategory.HEALTH),
    ("Her passport number is XK7734421 from Quillmoor.", "Quillmoor passport", ConsentCategory.IDENTITY),
    ("He lives at 17 Marrowvale Street in Quillmoor.", "Marrowvale home", ConsentCategory.LOCATION),
]
SECRET_WORDS = ("zebrafinch", "quetiapine", "quillmoor", "marrowvale", "xk7734421")


def write(store: MemoryStore, text: str, *, title: str | None = None, category: str | None = None) -> Memory:
    memory = memory_write(store=store, content=text, principal="test", title=title).memory
    if category is not None:
        Memory.objects.filter(pk=memory.pk).update(consent_category=category)
    return memory


def fill(store: MemoryStore) -> dict[str, list[str]]:
    ids: dict[str, list[str]] = {topic: [] for topic in TOPICS}
    for topic, texts in TOPICS.items():
        for text in texts:
            ids[topic].append(write(store, text, category=ConsentCategory.PREFERENCES).pk)
    return ids


def staff(project: Project, name: str, *, superuser: bool = False) -> Client:
    if superuser:
        user = User.objects.create_superuser(name, f"{name}@example.com", "pw")
    else:
        user = User.objects.create_user(name, f"{name}@example.com", "pw", is_staff=True)
        user.user_permissions.set(Permission.objects.filter(content_type__app_label="memory_engine",
                                                            codename__startswith="view_"))
        project.members.add(user)
    client = Client()
    client.force_login(user)
    return client


def get_map(client: Any, store_id: str, project: Project | None = None) -> Any:
    headers = {"HTTP_X_PROJECT_ID": project.pk} if project is not None else {}
    return client.get(URL, {"memory_store_id": store_id}, **headers)


# --------------------------------------------------------------------------- the geometry


def test_the_layout_keeps_neighbours_better_than_pca_alone_and_is_deterministic() -> None:
    rng = np.random.default_rng(7)
    centres = rng.normal(size=(8, 64))
    vectors = centres[rng.integers(8, size=400)] + 0.9 * rng.normal(size=(400, 64))
    coords, method = layout_2d(vectors)
    assert method["projection"] == "pca+neighbour_layout"
    assert coords.shape == (400, 2) and np.abs(coords).max() <= 1.0 + 1e-9
    assert trustworthiness(vectors, coords) > trustworthiness(vectors, pca_2d(vectors)[0]) + 0.05
    again, _ = layout_2d(vectors)
    assert np.allclose(coords, again)
    labels = kmeans(vectors, 8)
    assert np.array_equal(labels, kmeans(vectors, 8))
    assert np.bincount(labels).tolist() == sorted(np.bincount(labels).tolist(), reverse=True)  # largest first
    assert [choose_k(n) for n in (0, 1, 6, 20, 150, 100000)] == [1, 1, 1, 2, 6, 12]
    assert layout_2d(vectors[:1])[0].tolist() == [[0.0, 0.0]] and layout_2d(vectors[:0])[0].shape == (0, 2)


def test_cluster_labels_are_the_words_that_set_a_cluster_apart() -> None:
    labels = cluster_labels({0: ["Kubernetes cluster upgrade", "the Kubernetes nodes"],
                             1: ["cello practice tonight", "the cello teacher"], 2: []})
    assert labels[0].startswith("kubernetes") and labels[1].startswith("cello") and labels[2] == ""


# --------------------------------------------------------------------------- the API


@pytest.mark.django_db
def test_every_live_memory_is_a_point_in_labelled_clusters(project: Project, client: Any) -> None:
    store = MemoryStoreFactory(project=project)
    ids = fill(store)
    old = write(store, "The user's favourite dessert was panna cotta.")
    Memory.objects.filter(pk=old.pk).update(invalidated_at=timezone.now())  # not live: no point
    answer = get_map(client, store.pk)
    assert answer.status_code == 200, answer.content
    body = answer.json()
    assert body["status"] == "ready" and body["stale"] is False and body["unplaced"] == 0
    assert body["method"]["projection"] == "pca+neighbour_layout" and body["method"]["clusters"] == choose_k(24)
    points = body["points"]
    assert sorted(p["id"] for p in points) == sorted(i for topic in ids.values() for i in topic)
    assert all(-1 <= p["x"] <= 1 and -1 <= p["y"] <= 1 and p["masked"] is False for p in points)
    assert all(p["text_preview"] and p["consent_category"] == "memory:preferences" for p in points)
    assert sum(c["size"] for c in body["clusters"]) == len(points)
    assert all(c["label"] for c in body["clusters"] if c["size"])
    # each topic sits mostly in one cluster
    cluster_of = {p["id"]: p["cluster"] for p in points}
    for topic_ids in ids.values():
        counts = np.bincount([cluster_of[i] for i in topic_ids])
        assert counts.max() >= 6, (topic_ids, counts)
    assert MemoryMap.objects.get(store=store).project_id == project.pk


@pytest.mark.django_db
def test_sensitive_points_are_masked_for_every_principal_and_in_the_admin(project: Project) -> None:
    store = MemoryStoreFactory(project=project, access_tags=["team:a"])
    fill(store)
    secrets = [write(store, text, title=title, category=category) for text, title, category in SECRETS]
    # a memory claimed sensitive is masked whatever its text
    secrets.append(write(store, "The user likes Quillmoor cheese.", category=ConsentCategory.LOCATION))
    team_key = api_key_create(project=project, grants=[{"pattern": "team:a", "actions": ["search"]}])[1]
    callers = {
        "key": (api_client(make_key(project)), None),
        "read_only": (api_client(make_key(project, read_only=True)), None),
        "narrowed": (api_client(team_key), None),
        "staff": (staff(project, "map-viewer"), project),
        "superuser": (staff(project, "map-root", superuser=True), project),
    }
    for name, (client, header_project) in callers.items():
        answer = get_map(client, store.pk, header_project)
        assert answer.status_code == 200, (name, answer.content)
        text = answer.content.decode()
        masked = [p for p in answer.json()["points"] if p["masked"]]
        assert len(masked) == len(secrets), name
        assert all(set(p) == {"x", "y", "cluster", "consent_category", "masked"} for p in masked), name
        assert {p["consent_category"] for p in masked} == {c for _, _, c in SECRETS}
        for secret in secrets:
            assert secret.pk not in text, name
        for word in SECRET_WORDS:
            assert word not in text.lower(), (name, word)
    # the admin's picture: a hollow dot per masked point, no link, no tooltip, no id, no word of theirs
    admin = callers["superuser"][0]
    page = admin.get(f"/admin/memory_engine/memorystore/{store.pk}/map/")
    assert page.status_code == 200
    html = page.content.decode()
    assert html.count('class="masked"') == len(secrets)
    assert len(re.findall(r'<a href="/admin/memory_engine/memory/mem_', html)) == 24
    for secret in secrets:
        assert secret.pk not in html
    for word in SECRET_WORDS:
        assert word not in html.lower()
    change = admin.get(f"/admin/memory_engine/memorystore/{store.pk}/change/")
    assert f"/admin/memory_engine/memorystore/{store.pk}/map/" in change.content.decode()


@pytest.mark.django_db
def test_a_point_is_masked_by_its_category_of_now(project: Project, client: Any) -> None:
    store = MemoryStoreFactory(project=project)
    fill(store)
    memory = Memory.objects.filter(store=store).first()
    assert memory is not None
    assert get_map(client, store.pk).json()["points"][0]["id"] == memory.pk
    Memory.objects.filter(pk=memory.pk).update(consent_category=ConsentCategory.HEALTH)
    first = get_map(client, store.pk).json()["points"][0]
    assert first["masked"] is True and "id" not in first  # the cached map, served masked at once


@pytest.mark.django_db
def test_a_forgotten_memory_leaves_the_map_at_once(project: Project, client: Any) -> None:
    store = MemoryStoreFactory(project=project)
    fill(store)
    assert len(get_map(client, store.pk).json()["points"]) == 24
    gone = Memory.objects.filter(store=store).order_by("created_at")[3]
    memory_forget(memory=gone, principal="test")
    body = get_map(client, store.pk).json()
    assert len(body["points"]) == 23 and gone.pk not in json.dumps(body)
    assert sum(c["size"] for c in body["clusters"]) == 23


@pytest.mark.django_db
def test_the_map_goes_with_its_store(project: Project, client: Any, other_project: Project) -> None:
    own = MemoryStoreFactory(project=project, access_tags=["team:a"])
    theirs = MemoryStoreFactory(project=project, access_tags=["team:b"])
    foreign = MemoryStoreFactory(project=other_project)
    for store in (own, theirs, foreign):
        write(store, "The user likes jazz.")
    random_id = "ms_0000000000" + "0123456789abcdef"
    unknown = get_map(client, random_id)
    assert unknown.status_code == 400 and unknown.json()["code"] == "UNKNOWN_SCOPE"
    other = get_map(client, foreign.pk)
    assert (other.status_code, other.content.decode().replace(foreign.pk, "<ID>")) == (
        400, unknown.content.decode().replace(random_id, "<ID>"))
    narrowed = api_client(api_key_create(project=project, grants=[{"pattern": "team:a", "actions": ["search"]}])[1])
    assert get_map(narrowed, own.pk).status_code == 200
    hidden = get_map(narrowed, theirs.pk)
    assert hidden.status_code == 400 and hidden.json()["code"] == "UNKNOWN_SCOPE"
    assert not MemoryMap.objects.filter(store__in=[theirs, foreign]).exists()  # nothing computed for them
    assert client.get(URL).json()["code"] == "VALIDATION_ERROR"
    assert client.get(URL, {"memory_store_id": own.pk, "store": "x"}).json()["code"] == "UNKNOWN_FIELD"
    viewer = Client()
    viewer.force_login(User.objects.create_user("map-nobody", "n@example.com", "pw", is_staff=True))
    project.members.add(User.objects.get(username="map-nobody"))
    refused = get_map(viewer, own.pk, project)
    assert refused.status_code == 403 and refused.json()["code"] == "MODEL_PERMISSION_REQUIRED"


@pytest.mark.django_db
def test_a_map_is_computed_again_when_the_store_changed_enough(
        project: Project, client: Any, settings: Any, django_capture_on_commit_callbacks: Any) -> None:
    store = MemoryStoreFactory(project=project)
    fill(store)
    first = get_map(client, store.pk).json()
    computed_at = MemoryMap.objects.get(store=store).computed_at
    write(store, "The user plays the oboe on Sundays.")  # 25 of 24: within 10%
    with django_capture_on_commit_callbacks(execute=True) as queued:
        same = get_map(client, store.pk).json()
    assert not queued and same["stale"] is False and len(same["points"]) == 24  # the cached map, as it was
    for text in ("He repairs old bicycles.", "She grows tomatoes on the balcony.", "He writes poems in Welsh."):
        write(store, text)  # 28 of 24: more than 10% more
    with django_capture_on_commit_callbacks(execute=False) as queued:
        stale = get_map(client, store.pk).json()
    assert len(queued) == 1 and stale["stale"] is True and len(stale["points"]) == 24
    with django_capture_on_commit_callbacks(execute=False) as again:
        get_map(client, store.pk)
    assert not again  # asked for already: not enqueued twice
    queued[0]()  # the worker (the task runs inline in unit tests)
    fresh = get_map(client, store.pk).json()
    assert fresh["stale"] is False and len(fresh["points"]) == 28 and fresh["computed_at"] != first["computed_at"]
    # too old: computed again whatever the count
    MemoryMap.objects.filter(store=store).update(computed_at=computed_at - timedelta(hours=2),
                                                 requested_at=computed_at - timedelta(hours=2, minutes=1))
    with django_capture_on_commit_callbacks(execute=False) as queued:
        assert get_map(client, store.pk).json()["stale"] is True
    assert len(queued) == 1


# --------------------------------------------------------------------------- a real worker


@pytest.fixture
def qcluster_env() -> dict[str, str]:
    return {"MEMORY_ENGINE_EMBEDDING_PROVIDER": "tests.providers.HashingEmbeddingProvider"}


@pytest.mark.timeout(180)
def test_a_map_row_carries_its_stores_project_however_it_is_written(project: Project) -> None:
    store = MemoryStoreFactory(project=project)
    assert MemoryMap.objects.create(store=store).project_id == project.pk  # the ORM names no project
    MemoryMap.objects.filter(store=store).delete()
    with connection.cursor() as cursor:  # raw SQL that names none: the trigger of migration 0023 fills it
        cursor.execute("INSERT INTO memory_engine_memorymap (store_id, status, points, clusters, method, "
                       "live_memories, error) VALUES (%s, 'pending', '[]', '[]', '{}', 0, '')", [store.pk])
    assert MemoryMap.objects.get(store=store).project_id == project.pk


def test_a_large_store_gets_its_first_map_from_a_worker(transactional_db: Any, qcluster: Any, settings: Any) -> None:
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "MEMORY_MAP_SYNC_MAX_MEMORIES": 10}
    project = ProjectFactory()
    client = api_client(make_key(project))
    store = MemoryStoreFactory(project=project)
    fill(store)
    pending = get_map(client, store.pk)
    assert pending.status_code == 202, pending.content
    assert pending.json()["status"] == "pending" and "points" not in pending.json()
    ready = wait_for(lambda: (answer := get_map(client, store.pk)).status_code == 200 and answer, timeout=120)
    body = ready.json()
    assert len(body["points"]) == 24 and body["stale"] is False
    assert MemoryMap.objects.get(store=store).requested_at is not None
