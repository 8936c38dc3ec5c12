"""``POST /api/v1/embeddings`` takes an OpenAI client's request: the official ``openai`` client
against the live server (it asks for base64 vectors and sends ``model``), and the fields such a
client may send, each with what it does."""

from __future__ import annotations

import base64
from typing import Any

import numpy as np
import openai
import pytest

from memory_engine.providers.embeddings import require_embedding_provider

from .tool_setup import Setup, setup  # noqa: F401 - fixture

pytestmark = pytest.mark.timeout(120)


def test_the_official_openai_client(setup: Setup, live_server: Any) -> None:  # noqa: F811
    client = openai.OpenAI(base_url=f"{live_server.url}/api/v1", api_key=setup.key, max_retries=0)
    answer = client.embeddings.create(model="text-embedding-3-small", input=["Grace keeps bees.", "Hives"])
    provider = require_embedding_provider()
    assert answer.model == provider.model_name
    assert [item.index for item in answer.data] == [0, 1]
    expected = provider.embed_documents(["Grace keeps bees.", "Hives"])
    for item, vector in zip(answer.data, expected, strict=True):
        assert len(item.embedding) == provider.dimensions
        assert np.allclose(item.embedding, vector, atol=1e-6)
    floats = client.embeddings.create(model="x", input="Hives", encoding_format="float",
                                      dimensions=provider.dimensions)
    assert np.allclose(floats.data[0].embedding, expected[1], atol=1e-6)
    with pytest.raises(openai.BadRequestError) as refused:
        client.embeddings.create(model="x", input="Hives", dimensions=provider.dimensions + 1)
    body: Any = refused.value.body
    assert body["code"] == "VALIDATION_ERROR" and "dimensions" in body["details"]["fields"]


def test_base64_vectors_and_ignored_fields(client: Any) -> None:
    response = client.post("/api/v1/embeddings", {"input": "Hives", "encoding_format": "base64", "model": "any",
                                                  "user": "u-1"}, format="json")
    assert response.status_code == 200, response.content
    encoded = response.json()["data"][0]["embedding"]
    vector = np.frombuffer(base64.b64decode(encoded), dtype="<f4")
    assert np.allclose(vector, require_embedding_provider().embed_documents(["Hives"])[0], atol=1e-6)
    wrong = client.post("/api/v1/embeddings", {"input": "Hives", "encoding_format": "int8"}, format="json")
    assert wrong.status_code == 400 and wrong.json()["code"] == "VALIDATION_ERROR"
