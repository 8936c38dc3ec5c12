"""The OpenAI-compatible LLM provider against a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from memory_engine.exceptions import LLMError
from memory_engine.providers.llm import get_llm_provider, require_llm_provider

from .conftest import engine
from .servers import FakeLLM


def configure(settings: Any, server: FakeLLM, **extra: Any) -> None:
    engine(settings, LLM={"BASE_URL": server.base_url, "API_KEY": "sk-test", "MODEL": "m1", "TIMEOUT": 0.5,
                          "RETRIES": 0, **extra})


def test_not_configured_answers_none(settings: Any) -> None:
    engine(settings, LLM=None)
    assert get_llm_provider() is None
    with pytest.raises(LLMError) as info:
        require_llm_provider()
    assert info.value.code == "LLM_NOT_CONFIGURED"


def test_overrides_alone_configure_a_provider(settings: Any, fake_llm: FakeLLM) -> None:
    engine(settings, LLM=None)
    provider = get_llm_provider({"base_url": fake_llm.base_url, "model": "m2", "retries": 0})
    fake_llm.reply = "hello"
    assert provider is not None and provider.complete([{"role": "user", "content": "hi"}]) == "hello"
    assert fake_llm.received[0]["json"]["model"] == "m2"


def test_complete_posts_an_openai_chat_request(settings: Any, fake_llm: FakeLLM) -> None:
    configure(settings, fake_llm)
    fake_llm.reply = '["a fact"]'
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    text = get_llm_provider().complete(messages, max_tokens=50)
    assert text == '["a fact"]'
    request = fake_llm.received[0]
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == "Bearer sk-test"
    assert request["json"]["messages"] == messages
    assert request["json"]["temperature"] == 0.0
    assert request["json"]["model"] == "m1"
    assert request["json"]["max_tokens"] == 50
    assert "tools" not in request["json"]


def test_model_argument_overrides_the_configured_model(settings: Any, fake_llm: FakeLLM) -> None:
    configure(settings, fake_llm)
    get_llm_provider().complete([{"role": "user", "content": "x"}], model="other")
    assert fake_llm.received[0]["json"]["model"] == "other"


def test_no_model_anywhere_is_not_configured(settings: Any, fake_llm: FakeLLM) -> None:
    configure(settings, fake_llm, MODEL="")
    with pytest.raises(LLMError) as info:
        get_llm_provider().complete([{"role": "user", "content": "x"}])
    assert info.value.code == "LLM_NOT_CONFIGURED"
    assert fake_llm.received == []


def test_server_error_is_llm_http_error_after_retries(settings: Any, fake_llm: FakeLLM) -> None:
    configure(settings, fake_llm, RETRIES=1)
    fake_llm.reply = (500, {"error": "boom"}, 0)
    with pytest.raises(LLMError) as info:
        get_llm_provider().complete([{"role": "user", "content": "x"}])
    assert info.value.code == "LLM_HTTP_ERROR"
    assert len(fake_llm.received) == 2


def test_client_error_is_not_retried(settings: Any, fake_llm: FakeLLM) -> None:
    configure(settings, fake_llm, RETRIES=2)
    fake_llm.reply = (401, {"error": "bad key"}, 0)
    with pytest.raises(LLMError) as info:
        get_llm_provider().complete([{"role": "user", "content": "x"}])
    assert info.value.code == "LLM_HTTP_ERROR"
    assert len(fake_llm.received) == 1
    assert "sk-test" not in info.value.message


def test_timeout_is_llm_timeout_and_bounded(settings: Any, fake_llm: FakeLLM) -> None:
    configure(settings, fake_llm, TIMEOUT=0.2)
    # held until the test is done: waiting for the answer would give LLM_BAD_RESPONSE, not a timeout
    fake_llm.reply = (200, {"choices": []}, 0)
    fake_llm.hold = threading.Event()
    with pytest.raises(LLMError) as info:
        get_llm_provider().complete([{"role": "user", "content": "x"}])
    fake_llm.hold.set()
    assert info.value.code == "LLM_TIMEOUT"


def test_per_call_timeout(settings: Any, fake_llm: FakeLLM) -> None:
    # the setting outlasts the hold (60 s): ignoring timeout=0.2 would end in LLM_BAD_RESPONSE
    configure(settings, fake_llm, TIMEOUT=90)
    fake_llm.reply = (200, {"choices": []}, 0)
    fake_llm.hold = threading.Event()  # released by the fixture's close()
    with pytest.raises(LLMError) as info:
        get_llm_provider().complete([{"role": "user", "content": "x"}], timeout=0.2)
    assert info.value.code == "LLM_TIMEOUT"


@pytest.mark.parametrize("body", [b"not json", {"choices": []}, {"choices": [{"message": {"content": 3}}]}, []])
def test_malformed_answers_are_bad_response(settings: Any, fake_llm: FakeLLM, body: Any) -> None:
    configure(settings, fake_llm)
    fake_llm.reply = (200, body, 0)
    with pytest.raises(LLMError) as info:
        get_llm_provider().complete([{"role": "user", "content": "x"}])
    assert info.value.code == "LLM_BAD_RESPONSE"


def test_content_parts_are_joined(settings: Any, fake_llm: FakeLLM) -> None:
    configure(settings, fake_llm)
    fake_llm.reply = (200, {"choices": [{"message": {"content": [{"type": "text", "text": "a"},
                                                                 {"type": "text", "text": "b"}]}}]}, 0)
    assert get_llm_provider().complete([{"role": "user", "content": "x"}]) == "ab"
