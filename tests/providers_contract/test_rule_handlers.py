"""One contract every rule handler passes (built-in, callable, HTTP), chosen by handler type.

Each handler runs for real: the built-in one against an OpenAI-compatible server on
127.0.0.1, the HTTP one against a handler server on 127.0.0.1 that checks the signature,
the callable one by import path.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from memory_engine.exceptions import MemoryEngineError, ValidationFailed
from memory_engine.models import MemoryRule
from memory_engine.providers.rule_handlers import COMMON_KEYS, HANDLER_CLASSES, RuleHandler, get_rule_handler
from memory_engine.services.generations import record_generation
from memory_engine.services.rules import coerce_facts, validate_rule_handler
from tests.factories import AgentFactory
from tests.rules.conftest import engine
from tests.rules.servers import FakeLLM, FakeServer, verify_signature

FACTS = ["The user lives in Bergen.", {"content": "The user prefers email.", "tags": {"kind": "preference"}}]
SECRET = "handler-secret"


def callable_facts(transcript: str, rule: Any, generation: Any) -> list[Any]:
    """A callable handler answering the contract's facts (imported by path)."""
    return list(FACTS)


def callable_fails(transcript: str, rule: Any, generation: Any) -> Any:
    return "not a list"


class RuleHandlerContract:
    """Mixin: subclasses provide ``handler_type``, a ``config`` fixture (a handler that answers
    :data:`FACTS`) and a ``failing_config`` fixture (a handler that answers nonsense)."""

    handler_type: str

    @pytest.fixture
    def generation(self, project: Any) -> Any:
        agent = AgentFactory(project=project)
        return record_generation(agent=agent, input_messages=[{"role": "user", "content": "I moved to Bergen."}],
                                 output="Noted.", status="completed")

    def rule(self, store: Any, config: dict[str, Any]) -> MemoryRule:
        return MemoryRule.objects.create(store=store, handler_type=self.handler_type, handler_config=config)

    def test_chosen_by_handler_type(self) -> None:
        handler = get_rule_handler(self.handler_type)
        assert isinstance(handler, RuleHandler) and handler.handler_type == self.handler_type
        assert get_rule_handler(self.handler_type) is handler  # built once
        assert HANDLER_CLASSES[self.handler_type].endswith(type(handler).__name__)

    def test_extract_proposes_the_facts(self, store: Any, generation: Any, config: dict[str, Any]) -> None:
        items = get_rule_handler(self.handler_type).extract("user: I moved to Bergen.", self.rule(store, config),
                                                           generation)
        facts, invalid = coerce_facts(items)
        assert invalid == 0
        assert [(fact.content, fact.tags) for fact in facts] == [
            ("The user lives in Bergen.", {}), ("The user prefers email.", {"kind": "preference"})]

    def test_failure_has_a_stable_code(self, store: Any, generation: Any, failing_config: dict[str, Any]) -> None:
        with pytest.raises(MemoryEngineError) as info:
            get_rule_handler(self.handler_type).extract("user: hi", self.rule(store, failing_config), generation)
        assert info.value.code and info.value.code.isupper()

    def test_valid_config_is_accepted_and_keys_are_declared(self, config: dict[str, Any]) -> None:
        cleaned = validate_rule_handler(handler_type=self.handler_type, config=config, trusted=True)
        assert set(cleaned) <= get_rule_handler(self.handler_type).config_keys | COMMON_KEYS

    def test_unknown_keys_are_refused(self, config: dict[str, Any]) -> None:
        with pytest.raises(ValidationFailed) as info:
            validate_rule_handler(handler_type=self.handler_type, config={**config, "bogus": "x"}, trusted=True)
        assert info.value.code == "HANDLER_INVALID" and info.value.details == {"unknown": ["bogus"]}


class TestBuiltinHandler(RuleHandlerContract):
    handler_type = "builtin"

    @pytest.fixture
    def llm(self, settings: Any) -> Iterator[FakeLLM]:
        server = FakeLLM()
        engine(settings, LLM={"BASE_URL": server.base_url, "API_KEY": "sk-test", "MODEL": "m", "TIMEOUT": 2,
                              "RETRIES": 0})
        yield server
        server.close()

    @pytest.fixture
    def config(self, llm: FakeLLM) -> dict[str, Any]:
        llm.reply = "Here you go: " + json.dumps(FACTS)
        return {"prompt": "Extract facts."}

    @pytest.fixture
    def failing_config(self, llm: FakeLLM) -> dict[str, Any]:
        llm.reply = "I could not find anything."
        return {}


class TestCallableHandler(RuleHandlerContract):
    handler_type = "callable"

    @pytest.fixture
    def config(self) -> dict[str, Any]:
        return {"path": f"{__name__}.callable_facts"}

    @pytest.fixture
    def failing_config(self) -> dict[str, Any]:
        return {"path": f"{__name__}.callable_fails"}


class TestHttpHandler(RuleHandlerContract):
    handler_type = "http"

    @pytest.fixture
    def server(self) -> Iterator[FakeServer]:
        def respond(request: dict[str, Any]) -> tuple[int, Any, float]:
            if request["path"] == "/broken":
                return 500, {"error": "down"}, 0
            if not verify_signature(SECRET, request["headers"], request["raw"]):
                return 401, {"error": "bad signature"}, 0
            return 200, {"facts": FACTS}, 0

        server = FakeServer(respond)
        yield server
        server.close()

    @pytest.fixture
    def config(self, server: FakeServer) -> dict[str, Any]:
        return {"url": f"{server.url}/facts", "secret": SECRET, "retries": 0}

    @pytest.fixture
    def failing_config(self, server: FakeServer) -> dict[str, Any]:
        return {"url": f"{server.url}/broken", "secret": SECRET, "retries": 0}
