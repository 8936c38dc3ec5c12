"""The memory map's geometry, pure functions over vectors and texts (numpy only).

* :func:`layout_2d`: each vector's place in the plane, in [-1, 1]: the plane of the set's two
  principal components (:func:`pca_2d`), then refined so that each point keeps its nearest
  neighbours near (:func:`neighbour_layout`, a small UMAP-style layout over the k-nearest-neighbour
  graph: attraction along its edges, repulsion from sampled points). Measured with
  :func:`trustworthiness` (bench/memory_map.py, docs/benchmarks.md): PCA alone keeps a point's
  neighbours about 0.7-0.8, the refined layout above 0.9;
* :func:`kmeans`: spherical k-means (cosine) with k-means++ seeding from a fixed seed, so the
  same store gives the same clusters; :func:`choose_k` the number of clusters for a set;
* :func:`cluster_labels`: a label per cluster, the terms most characteristic of its texts
  against the other clusters' (class-based TF-IDF);
* :func:`trustworthiness`: how well a layout keeps each point's nearest neighbours (what
  bench/memory_map.py measures).
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

#: The most clusters a map has, however large the store.
MAX_CLUSTERS = 12


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms == 0, 1, norms)


def pca_2d(vectors: np.ndarray) -> tuple[np.ndarray, list[float]]:
    """``(n, 2)`` coordinates in [-1, 1] on the two principal components of the unit vectors, and
    the share of the variance each explains. From the d×d covariance (d: the dimension), not an
    SVD of the n×d matrix: the same axes, much less work for many points. The sign of each axis is
    fixed (its largest loading positive), so a map does not flip between computations."""
    count = len(vectors)
    if count < 2:
        return np.zeros((count, 2)), [0.0, 0.0]
    centred = _unit(np.asarray(vectors, dtype=np.float64))
    centred = centred - centred.mean(axis=0)
    variance, basis = np.linalg.eigh(centred.T @ centred)
    axes = basis[:, ::-1][:, :2].T
    signs = np.sign(axes[np.arange(2), np.argmax(np.abs(axes), axis=1)])
    axes = axes * np.where(signs == 0, 1, signs)[:, None]
    coords = _scaled(centred @ axes.T)
    total = float(np.clip(variance, 0, None).sum())
    explained = [float(max(v, 0) / total) if total > 0 else 0.0 for v in variance[::-1][:2]]
    return coords, explained


def _scaled(coords: np.ndarray) -> np.ndarray:
    coords = coords - coords.mean(axis=0) if len(coords) else coords
    scale = np.abs(coords).max() if len(coords) else 0
    return coords / scale if scale > 0 else coords


def nearest_neighbours(vectors: np.ndarray, k: int, *, block: int = 1024) -> np.ndarray:
    """``(n, k)`` indexes of each vector's k nearest others by cosine (blocks of rows at a time:
    memory grows with n·block, not n²)."""
    points = _unit(np.asarray(vectors, dtype=np.float32))
    count = len(points)
    found = np.zeros((count, k), dtype=np.int64)
    for start in range(0, count, block):
        similarity = points[start:start + block] @ points.T
        similarity[np.arange(len(similarity)), np.arange(start, start + len(similarity))] = -np.inf
        found[start:start + block] = np.argpartition(-similarity, k, axis=1)[:, :k]
    return found


#: The curve of UMAP's default min_dist 0.1, spread 1: similarity in the plane 1 / (1 + a·d^(2b)).
_A, _B = 1.577, 0.895


def _summed(index: np.ndarray, values: np.ndarray, count: int) -> np.ndarray:
    return np.stack([np.bincount(index, weights=values[:, 0], minlength=count),
                     np.bincount(index, weights=values[:, 1], minlength=count)], axis=1)


def neighbour_layout(vectors: np.ndarray, start: np.ndarray, *, neighbours: int = 10, epochs: int = 200,
                     negatives: int = 5, seed: int = 0) -> np.ndarray:
    """``start`` (a PCA layout) moved so that each point lies near its ``neighbours`` nearest in
    the original space: ``epochs`` rounds of attraction along the k-NN graph's edges and
    repulsion from ``negatives`` points sampled per edge (a fixed seed: the same input gives the
    same map). Coordinates in [-1, 1]."""
    count = len(vectors)
    k = min(neighbours, count - 1)
    if k < 2:
        return start
    tails = nearest_neighbours(vectors, k).ravel()
    heads = np.repeat(np.arange(count), k)
    sampled_heads = np.repeat(heads, negatives)
    rng = np.random.default_rng(seed)
    layout = np.asarray(start, dtype=np.float64) * 10.0
    for epoch in range(epochs):
        rate = 1.0 - epoch / epochs
        delta = layout[heads] - layout[tails]
        squared = (delta ** 2).sum(axis=1)
        safe = np.where(squared > 0, squared, 1.0)
        pull = np.where(squared > 0, -2 * _A * _B * safe ** (_B - 1) / (1 + _A * safe ** _B), 0.0)
        step = np.clip(pull[:, None] * delta, -4, 4)
        layout += rate * (_summed(heads, step, count) - _summed(tails, step, count))
        others = rng.integers(count, size=len(sampled_heads))
        delta = layout[sampled_heads] - layout[others]
        squared = (delta ** 2).sum(axis=1)
        push = 2 * _B / ((0.001 + squared) * (1 + _A * squared ** _B))
        step = np.clip(push[:, None] * delta, -4, 4)
        layout += rate * _summed(sampled_heads, step, count)
    return _scaled(layout)


def layout_2d(vectors: np.ndarray, *, seed: int = 0) -> tuple[np.ndarray, dict[str, object]]:
    """Coordinates in [-1, 1] for ``vectors`` and how they were made (for the map's ``method``):
    PCA, refined by :func:`neighbour_layout` from 16 points up (200 rounds up to 5,000 points,
    100 beyond: the graph's work grows with the points)."""
    coords, explained = pca_2d(vectors)
    method: dict[str, object] = {"projection": "pca", "explained_variance": [round(v, 4) for v in explained]}
    if len(vectors) >= 16:
        epochs = 200 if len(vectors) <= 5000 else 100
        coords = neighbour_layout(vectors, coords, epochs=epochs, seed=seed)
        method.update(projection="pca+neighbour_layout", neighbours=10, epochs=epochs)
    return coords, method


def choose_k(count: int) -> int:
    """About sqrt(n / 4) clusters: 1 up to 6 memories, 6 for 150, at most :data:`MAX_CLUSTERS`."""
    return max(1, min(MAX_CLUSTERS, round(math.sqrt(count / 4)), count))


def kmeans(vectors: np.ndarray, k: int, *, seed: int = 0, iterations: int = 30) -> np.ndarray:
    """Cluster index (0..k-1) per vector: spherical k-means, deterministic for a given input.
    Clusters are numbered by size, largest first."""
    count = len(vectors)
    if count == 0:
        return np.zeros(0, dtype=int)
    k = max(1, min(k, count))
    points = _unit(np.asarray(vectors, dtype=np.float64))
    rng = np.random.default_rng(seed)
    centres = [points[rng.integers(count)]]
    for _ in range(1, k):  # k-means++: the next centre far (in cosine) from the chosen ones
        distance = 1 - np.max(points @ np.array(centres).T, axis=1)
        distance = np.clip(distance, 0, None)
        total = distance.sum()
        if total <= 0:
            break
        centres.append(points[rng.choice(count, p=distance / total)])
    matrix = np.array(centres)
    labels = np.zeros(count, dtype=int)
    for step in range(iterations):
        new = np.argmax(points @ matrix.T, axis=1)
        if step and np.array_equal(new, labels):
            break
        labels = new
        for index in range(len(matrix)):
            members = points[labels == index]
            if len(members):
                matrix[index] = members.sum(axis=0)
        matrix = _unit(matrix)
    order = [index for index, _ in Counter(labels.tolist()).most_common()]
    remap = {old: new for new, old in enumerate(order)}
    return np.array([remap[label] for label in labels.tolist()], dtype=int)


_TERM = re.compile(r"[^\W\d_][\w'-]{2,}")
_STOP = frozenset("""
a about above after again against all also am an and any are as at be because been before being below between both
but by can could did do does doing down during each few for from further had has have having he her here hers herself
him himself his how i if in into is it its itself just let like me more most my myself no nor not now of off on once
only or other our ours ourselves out over own same she should so some such than that the their theirs them themselves
then there these they this those through to too under until up very was we were what when where which while who whom
why will with would you your yours yourself yourselves user users customer customers prefers prefer wants want likes
like they've it's he's she's don't doesn't can't won't isn't aren't wasn't weren't
""".split())


def _terms(text: str) -> list[str]:
    return [term for term in (match.group(0).lower().strip("'-") for match in _TERM.finditer(text))
            if len(term) > 2 and term not in _STOP]


def cluster_labels(texts: Mapping[int, Sequence[str]], *, terms: int = 3) -> dict[int, str]:
    """A label per cluster of ``texts``: its ``terms`` words of highest class-based TF-IDF (the
    term's share of the cluster's words times log(1 + average words per cluster / the term's
    count in all clusters)). A cluster without words gets ""."""
    counts = {cluster: Counter(term for text in members for term in _terms(text)) for cluster, members in texts.items()}
    overall: Counter[str] = Counter()
    for counter in counts.values():
        overall.update(counter)
    average = sum(overall.values()) / max(len(counts), 1)
    labels = {}
    for cluster, counter in counts.items():
        size = sum(counter.values())
        if not size:
            labels[cluster] = ""
            continue
        scored = sorted(counter.items(), key=lambda item: (-(item[1] / size) * math.log(1 + average / overall[item[0]]),
                                                             item[0]))
        labels[cluster] = ", ".join(term for term, _ in scored[:terms])
    return labels


def trustworthiness(high: np.ndarray, low: np.ndarray, k: int = 10) -> float:
    """Venna and Kaski's trustworthiness of a layout ``low`` of ``high`` (cosine in the high
    space, Euclidean in the plane): 1 when every point's k nearest neighbours in the plane are
    among its k nearest in the original space, lower as strangers intrude. O(n²): for measuring."""
    count = len(high)
    if count <= k + 1:
        return 1.0
    unit = _unit(np.asarray(high, dtype=np.float64))
    high_rank = np.argsort(np.argsort(-(unit @ unit.T), axis=1), axis=1)  # 0: itself
    diff = low[:, None, :] - low[None, :, :]
    low_order = np.argsort((diff ** 2).sum(axis=2), axis=1)[:, 1:k + 1]
    penalty = 0.0
    for index in range(count):
        ranks = high_rank[index, low_order[index]]
        penalty += np.clip(ranks - k, 0, None).sum()
    return float(1 - 2 / (count * k * (2 * count - 3 * k - 1)) * penalty)
