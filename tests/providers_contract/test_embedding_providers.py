"""One contract every embedding provider passes, plus each provider's failure modes.

HTTP providers run against a real HTTP server on 127.0.0.1 that computes vectors
with the real default model, so the contract checks meaning, not just shapes.
"""

from __future__ import annotations

import json
import math
import threading

import pytest

from memory_engine.providers.embeddings.base import EmbeddingError, EmbeddingProvider
from memory_engine.providers.embeddings.http import OllamaEmbeddingProvider, OpenAIEmbeddingProvider
from memory_engine.providers.embeddings.onnx import OnnxEmbeddingProvider
from tests.httpserver import LocalServer

_reference = OnnxEmbeddingProvider(model="all-MiniLM-L6-v2", dimensions=384)


def ollama_handler(method, path, headers, body):
    request = json.loads(body)
    assert path == "/api/embed"
    return 200, {"model": request["model"], "embeddings": _reference.embed_documents(request["input"])}


def openai_handler(method, path, headers, body):
    request = json.loads(body)
    assert path == "/v1/embeddings"
    vectors = _reference.embed_documents(request["input"])
    rows = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
    return 200, {"object": "list", "data": list(reversed(rows)), "model": request["model"]}


class EmbeddingProviderContract:
    """Mixin: subclasses provide a ``provider`` fixture."""

    def test_shape_and_normalisation(self, provider: EmbeddingProvider) -> None:
        vectors = provider.embed_documents(["The cat sat on the mat.", "Quarterly revenue grew 5%.", "ü ñ 日本語"])
        assert len(vectors) == 3
        for vector in vectors:
            assert len(vector) == provider.dimensions == 384
            assert math.isclose(math.sqrt(sum(x * x for x in vector)), 1.0, rel_tol=1e-3)

    def test_meaning(self, provider: EmbeddingProvider) -> None:
        a, b, c = provider.embed_documents([
            "The customer prefers email contact",
            "The customer prefers contact by email",
            "The quarterly revenue grew 5%",
        ])
        cos = lambda x, y: sum(p * q for p, q in zip(x, y, strict=True))  # noqa: E731
        assert cos(a, b) > 0.9 > 0.3 > cos(a, c)

    def test_order_is_kept_across_batches(self, provider: EmbeddingProvider) -> None:
        texts = [f"sentence number {i} about {'cats' if i % 2 else 'finance'}" for i in range(70)]
        batched = provider.embed_documents(texts)
        single = [provider.embed_query(t) for t in (texts[0], texts[69])]
        for got, want in ((batched[0], single[0]), (batched[69], single[1])):
            assert sum(p * q for p, q in zip(got, want, strict=True)) > 0.999

    def test_empty_input(self, provider: EmbeddingProvider) -> None:
        assert provider.embed_documents([]) == []

    #: The model the subclass's ``provider`` fixture configures.
    configured_model = ""

    def test_model_name(self, provider: EmbeddingProvider) -> None:
        """The configured model is the name stored beside every vector; without one, the
        provider's own non-empty default."""
        assert provider.model_name == self.configured_model != ""
        unnamed = type(provider)(dimensions=provider.dimensions, options=provider.options)
        assert unnamed.model_name == type(provider).default_model != ""

    def test_count_tokens(self, provider: EmbeddingProvider) -> None:
        """One count per text, whitespace is free, nothing truncated; counting the words one by
        one never gives less than the whole (the chunker sums piece counts, so a chunk never
        holds more than it thinks)."""
        counts = provider.count_tokens(["", "   ", "hello world", "word " * 2000])
        assert counts[0] == counts[1] == 0 and counts[2] >= 2 and counts[3] >= 2000
        words = "Chunk sizes are counted in the embedder's own tokens.".split()
        assert sum(provider.count_tokens(words)) >= provider.count_tokens([" ".join(words)])[0]
        assert provider.count_tokens([]) == []


class TestOnnxProvider(EmbeddingProviderContract):
    configured_model = "all-MiniLM-L6-v2"

    @pytest.fixture
    def provider(self):
        return _reference

    def test_rejects_a_tampered_model_file(self, tmp_path):
        fake = tmp_path / "model.onnx"
        fake.write_bytes(b"not a model")
        provider = OnnxEmbeddingProvider(dimensions=384, options={"MODEL_PATH": str(fake),
                                                                  "MODEL_SHA256": "0" * 64})
        with pytest.raises(EmbeddingError, match="sha256"):
            provider.embed_documents(["x"])

    def test_count_tokens_uses_the_model_tokenizer(self):
        # WordPiece: an uncommon word is several tokens, which a length estimate would not know.
        assert _reference.count_tokens(["the", "internationalization", "😀"]) != [1, 5, 1]
        assert _reference.count_tokens(["the"]) == [1]
        words = "Chunk sizes are counted in the embedder's own tokens.".split()
        assert sum(_reference.count_tokens(words)) == _reference.count_tokens([" ".join(words)])[0]

    def test_long_text_is_truncated_not_failed(self):
        assert len(_reference.embed_query("word " * 5000)) == 384

    def test_a_call_of_mixed_lengths_equals_one_text_per_call_in_input_order(self):
        """Length-aware batching (texts run shortest first in sub-batches under a padded-token
        budget) changes nothing a caller sees: each vector is the one the text gets alone, in
        the caller's order, whatever the budget."""
        import numpy as np

        texts = [
            "Quarterly revenue grew 5% on strong cloud demand. " * 40,  # past the 256-token window
            "ok",
            "The customer prefers email contact.",
            "",
            "Mitochondria are the site of oxidative phosphorylation in eukaryotic cells. " * 6,
            "Paris",
            "A medium sentence about cats sleeping on warm laptops in the afternoon sun.",
            "word " * 120,
        ]
        alone = np.array([_reference.embed_documents([text])[0] for text in texts])
        for budget in (1, 64, 512, 10**9):
            provider = OnnxEmbeddingProvider(dimensions=384, options={"TOKEN_BUDGET": budget, "BATCH_SIZE": 3})
            together = np.array(provider.embed_documents(texts))
            np.testing.assert_allclose(together, alone, atol=1e-5)
        # the order really is the caller's: no two of these texts share a vector
        assert len({tuple(np.round(row, 4)) for row in alone}) == len(texts)

    def test_counts_from_offsets_equal_tokenizing_each_text_and_chunks_do_not_move(self):
        """count_tokens counts a part of a recently tokenized text from that text's token offsets;
        on varied texts (accents, CJK, Arabic, Greek, emoji, control characters, no-break spaces,
        words past WordPiece's 100 characters, blank runs) every count the chunker asks for equals
        tokenizing that text alone, so every strategy cuts exactly the chunks it cut before."""
        from tokenizers import Tokenizer

        from memory_engine.chunking import Page, chunk_pages
        from memory_engine.providers.embeddings.onnx import default_tokenizer_path

        plain = Tokenizer.from_file(str(default_tokenizer_path()))
        plain.no_truncation()
        plain.no_padding()

        def reference(texts):
            return [len(e.ids) for e in plain.encode_batch(list(texts), add_special_tokens=False)]

        provider = OnnxEmbeddingProvider(dimensions=384)
        asked: list[str] = []

        def counted(texts):
            asked.extend(texts)
            return provider.count_tokens(texts)

        sentences = [
            "Mitochondria are the site of oxidative phosphorylation. They make ATP!",
            "Élodie a réservé l'hôtel à Zürich; naïve café façade, résumé.",
            "東京は日本の首都です。人口は約千四百万人です。大阪は二番目に大きい都市です！",
            "الذكاء الاصطناعي يغير العالم. هذا نص عربي للاختبار؟",
            "ΟΔΥΣΣΕΥΣ και ΣΟΦΟΣ. Ἀθῆναι εἶναι πόλις… Δοκιμή τελικού σίγμα.",
            "Emoji 😀🎉 and flags 🇫🇷 in a line — with dashes – and “quotes” (yes).",
            "control\x1ccharacters\x1f inside\u200bwords and no\u00a0break\u00a0spaces here.",
            "https://example.com/" + "a1b2c3" * 30 + " is a long URL; " + "x" * 150 + " too.",
            "# Heading\n\n- item one\n- item two\n\n\n\n\n   \t\nTail paragraph\r\nwith CRLF.",
        ]
        texts = [
            "\n\n".join(sentences),
            " ".join(sentences * 3),
            "\n".join(sentences[2:4] * 6),
            ("word " * 300).strip(),
            "\u00a0 leading no-break space. " + sentences[1] * 5,
        ]
        for strategy in ("recursive", "page"):
            for size, overlap in ((200, 40), (24, 6)):
                pages = [Page(text, number) for number, text in enumerate(texts, 1)]
                provider._recent = threading.local()  # nothing kept from an earlier round
                asked.clear()
                ours = chunk_pages(pages, strategy=strategy, chunk_size=size, chunk_overlap=overlap,
                                   count_tokens=counted)
                assert provider.count_tokens(asked) == reference(asked)
                assert [provider.count_tokens([text])[0] for text in asked] == reference(asked)  # one by one
                theirs = chunk_pages(pages, strategy=strategy, chunk_size=size, chunk_overlap=overlap,
                                     count_tokens=reference)
                assert ours == theirs and len(ours) > 1

    def test_vectors_do_not_depend_on_the_tokenizer_call(self):
        """embed_documents tokenizes without character offsets (encode_batch_fast): the same ids,
        so the same vectors as with the offsets-computing call."""
        import numpy as np

        texts = ["Paris", "Élodie a réservé l'hôtel.", "東京は日本の首都です。", "word " * 400, "", "😀 ok"]
        fast = np.array(_reference.embed_documents(texts))
        _reference._load()
        slow = _reference._tokenizer.encode_batch(texts)
        assert [e.ids for e in _reference._tokenizer.encode_batch_fast(texts)] == [e.ids for e in slow]
        alone = np.array([_reference.embed_documents([text])[0] for text in texts])
        np.testing.assert_array_equal(fast[[0, 1, 2, 3, 5]], alone[[0, 1, 2, 3, 5]])

    def test_sub_batches_respect_the_padded_token_budget(self):
        provider = OnnxEmbeddingProvider(dimensions=384, options={"TOKEN_BUDGET": 100, "BATCH_SIZE": 4})
        lengths = [90, 5, 30, 6, 7, 8, 9, 200, 31]
        batches = provider._sub_batches(lengths)
        assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
        for batch in batches:
            width = max(lengths[i] for i in batch)
            assert len(batch) <= 4
            assert len(batch) == 1 or len(batch) * width <= 100
        assert [7] in batches  # longer than the budget: runs alone
        assert batches[0] == [1, 3, 4, 5]  # shortest first, BATCH_SIZE at most


class TestOllamaProvider(EmbeddingProviderContract):
    configured_model = "all-minilm"

    @pytest.fixture
    def provider(self):
        with LocalServer(ollama_handler) as server:
            yield OllamaEmbeddingProvider(model="all-minilm", dimensions=384,
                                          options={"BASE_URL": server.url, "BATCH_SIZE": 16})


class TestOpenAIProvider(EmbeddingProviderContract):
    configured_model = "text-embedding-test"

    @pytest.fixture
    def provider(self):
        with LocalServer(openai_handler) as server:
            yield OpenAIEmbeddingProvider(model="text-embedding-test", dimensions=384,
                                          options={"BASE_URL": f"{server.url}/v1", "API_KEY": "sk-test",
                                                   "BATCH_SIZE": 32})

    def test_sends_the_key(self):
        with LocalServer(openai_handler) as server:
            provider = OpenAIEmbeddingProvider(dimensions=384, options={"BASE_URL": f"{server.url}/v1",
                                                                       "API_KEY": "sk-test"})
            provider.embed_query("x")
            assert server.requests[0]["headers"]["Authorization"] == "Bearer sk-test"


def test_http_provider_retries_5xx_then_succeeds():
    calls = []

    def flaky(method, path, headers, body):
        calls.append(1)
        return (500, {"error": "boom"}) if len(calls) < 3 else ollama_handler(method, path, headers, body)

    with LocalServer(flaky) as server:
        provider = OllamaEmbeddingProvider(dimensions=384, options={"BASE_URL": server.url, "RETRIES": 2})
        assert len(provider.embed_query("hello")) == 384
    assert len(calls) == 3


def test_http_provider_gives_up_with_embedding_error():
    with LocalServer(lambda *a: (500, {"error": "down"})) as server:
        provider = OllamaEmbeddingProvider(dimensions=384, options={"BASE_URL": server.url, "RETRIES": 1})
        with pytest.raises(EmbeddingError, match="500"):
            provider.embed_query("hello")


def test_http_provider_times_out():
    release = threading.Event()

    def slow(*args):
        # answers only once released: a provider that waited for it would get a vector, not a timeout
        release.wait(timeout=60)
        return 200, {"embeddings": [[0.0] * 384]}

    with LocalServer(slow) as server:
        provider = OllamaEmbeddingProvider(dimensions=384, options={"BASE_URL": server.url, "TIMEOUT": 0.2,
                                                                    "RETRIES": 0})
        try:
            with pytest.raises(EmbeddingError, match="timed out"):
                provider.embed_query("hello")
        finally:
            release.set()


def test_wrong_dimension_is_an_error():
    with LocalServer(lambda *a: (200, {"embeddings": [[0.1] * 10]})) as server:
        provider = OllamaEmbeddingProvider(dimensions=384, options={"BASE_URL": server.url})
        with pytest.raises(EmbeddingError, match="10 dimensions"):
            provider.embed_query("hello")


def test_unexpected_shape_is_an_error():
    with LocalServer(lambda *a: (200, {"nope": 1})) as server:
        provider = OpenAIEmbeddingProvider(dimensions=384, options={"BASE_URL": server.url})
        with pytest.raises(EmbeddingError, match="unexpected shape"):
            provider.embed_query("hello")


def test_no_server_is_an_error():
    provider = OllamaEmbeddingProvider(dimensions=384, options={"BASE_URL": "http://127.0.0.1:9", "RETRIES": 0})
    with pytest.raises(EmbeddingError, match="connection failed"):
        provider.embed_query("hello")
