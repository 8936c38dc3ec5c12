"""MEMORY_ENGINE validated once, in memory_engine.conf: declared types coerced on first read,
bad values refused with the key and the expected type (ImproperlyConfigured, check E020),
unknown keys flagged with the closest known one (W020), caches dropped when settings change."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import SystemCheckError

from memory_engine.checks import check_engine_settings, check_pdf_extractor
from memory_engine.conf import (
    DEFAULT_DIMENSIONS,
    DEFAULTS,
    SETTINGS,
    TYPES,
    embedding_dimensions,
    engine_settings,
    resolve_provider,
)
from memory_engine.providers.embeddings import get_embedding_provider
from memory_engine.providers.rule_handlers.http import HttpHandler

ROOT = Path(__file__).resolve().parents[1]


def configure(settings: Any, **values: Any) -> None:
    settings.MEMORY_ENGINE = {**(getattr(settings, "MEMORY_ENGINE", {}) or {}), **values}


def ids(messages: list[Any]) -> list[str]:
    return [message.id for message in messages]


def test_every_default_reads_back_unchanged(settings: Any) -> None:
    settings.MEMORY_ENGINE = {}
    for name, default in DEFAULTS.items():
        assert getattr(engine_settings, name) == default, name
    assert embedding_dimensions() == DEFAULT_DIMENSIONS == DEFAULTS["EMBEDDING"]["DIMENSIONS"]
    assert check_engine_settings() == []


@pytest.mark.parametrize(("name", "given", "read"), [
    ("HTTP_RETRIES", "3", 3),                          # from an environment variable
    ("MAX_UPLOAD_BYTES", 1000.0, 1000),
    ("HTTP_MAX_SECONDS", "90", 90),
    ("JUDGE_FLOOR", "0.5", 0.5),
    ("RULE_FIRING_TIMEOUT", 900, 900),                 # an int stays an int ("900s" in messages)
    ("CHANGED_DETAIL_GATE", "false", False),           # bool("false") would be True
    ("CHANGED_DETAIL_GATE", 0, False),
    ("NUM_PROXIES", None, 0),
    ("KNOWLEDGE_LEXICAL_BACKEND", "TSVECTOR", "tsvector"),
    ("SEARCH_LEXICAL_WEIGHT", "1.5", 1.5),
    ("LLM_OVERRIDABLE", ("model", "Base_Url"), ["MODEL", "BASE_URL"]),
    ("OUTBOUND_ALLOW", None, []),
    ("MAX_DISCARD_BYTES", None, None),
    ("AUTH_FAILURE_RATE", "5/minute", "5/minute"),
    ("SEARCH_MIN_RELEVANCE", "0.5", 0.5),
    ("RELEVANCE_MODEL", {"VERSION": "mine", "GATE": {"intercept": "-3", "top_cosine": 9.5}, "WEIGHTS": {}},
     {"VERSION": "mine", "GATE": {"intercept": -3, "top_cosine": 9.5}, "WEIGHTS": {}}),
])
def test_values_are_coerced_once_to_their_declared_type(settings: Any, name: str, given: Any, read: Any) -> None:
    configure(settings, **{name: given})
    value = getattr(engine_settings, name)
    assert value == read and type(value) is type(read)
    assert check_engine_settings() == []


def test_nested_dicts_are_merged_and_coerced(settings: Any) -> None:
    configure(settings, EMBEDDING={"PROVIDER": None, "DIMENSIONS": "768"},
              LLM={"base_url": "http://llm.internal/v1", "api_key": "", "Timeout": "2.5", "RETRIES": "0"})
    assert engine_settings.EMBEDDING == {"PROVIDER": None, "MODEL": "all-MiniLM-L6-v2", "DIMENSIONS": 768,
                                         "OPTIONS": {}}
    assert embedding_dimensions() == 768
    # LLM keys in any case, empty values dropped: what get_llm_provider reads.
    assert engine_settings.LLM == {"BASE_URL": "http://llm.internal/v1", "TIMEOUT": 2.5, "RETRIES": 0}
    configure(settings, EMBEDDING={"DIMENSIONS": None, "OPTIONS": None})
    assert engine_settings.EMBEDDING["DIMENSIONS"] == DEFAULT_DIMENSIONS
    assert engine_settings.EMBEDDING["OPTIONS"] == {}


@pytest.mark.parametrize(("values", "message"), [
    ({"HTTP_RETRIES": "two"}, "MEMORY_ENGINE['HTTP_RETRIES'] must be an integer; got 'two'."),
    ({"HTTP_RETRIES": True}, "MEMORY_ENGINE['HTTP_RETRIES'] must be an integer; got True."),
    ({"MAX_UPLOAD_BYTES": 10.5}, "MEMORY_ENGINE['MAX_UPLOAD_BYTES'] must be an integer; got 10.5."),
    ({"JUDGE_TIMEOUT": "soon"}, "MEMORY_ENGINE['JUDGE_TIMEOUT'] must be a number; got 'soon'."),
    ({"CHANGED_DETAIL_GATE": "maybe"}, "MEMORY_ENGINE['CHANGED_DETAIL_GATE'] must be True or False; got 'maybe'."),
    ({"MAX_MEMORIES_PER_PROJECT": "many"},
     "MEMORY_ENGINE['MAX_MEMORIES_PER_PROJECT'] must be an integer or None; got 'many'."),
    # A bare string would be read as its characters: "10.0.0.0/8" as "1", "0", "." ...
    ({"OUTBOUND_ALLOW": "10.0.0.0/8"}, "MEMORY_ENGINE['OUTBOUND_ALLOW'] must be a list of strings; got '10.0.0.0/8'."),
    ({"HNSW_ITERATIVE_SCAN": "any"},
     "MEMORY_ENGINE['HNSW_ITERATIVE_SCAN'] must be one of 'off', 'relaxed_order', 'strict_order'; got 'any'."),
    ({"AUTH_FAILURE_RATE": "20 per minute"},
     "MEMORY_ENGINE['AUTH_FAILURE_RATE'] must be a rate such as \"20/min\" or None; got '20 per minute'."),
    ({"LLM_OVERRIDABLE": ["MODEL", "TEMPERATURE"]}, "MEMORY_ENGINE['LLM_OVERRIDABLE'] must be a list of PROMPT"),
    ({"EMBEDDING": None}, "MEMORY_ENGINE['EMBEDDING'] must be a dict; got None."),
    ({"EMBEDDING": {"DIMENSIONS": -3}}, "MEMORY_ENGINE['EMBEDDING']['DIMENSIONS'] must be a positive integer; got -3."),
    ({"LLM": {"BASE_URL": "http://llm/v1", "RETRIES": "x"}}, "MEMORY_ENGINE['LLM']['RETRIES'] must be an integer"),
    ({"LLM": ["http://llm/v1"]}, "MEMORY_ENGINE['LLM'] must be a dict or None"),
    ({"SEARCH_MIN_RELEVANCE": 1.5}, "MEMORY_ENGINE['SEARCH_MIN_RELEVANCE'] must be a number from 0 to 1; got 1.5."),
    ({"EVIDENCE_STRONG_RELEVANCE": -0.1},
     "MEMORY_ENGINE['EVIDENCE_STRONG_RELEVANCE'] must be a number from 0 to 1; got -0.1."),
    ({"RELEVANCE_MODEL": {"GATE": {"top_cosine": "high"}}},
     "MEMORY_ENGINE['RELEVANCE_MODEL']['GATE']['top_cosine'] must be a number; got 'high'."),
])
def test_a_bad_value_is_refused_with_its_key_and_type(settings: Any, values: dict[str, Any], message: str) -> None:
    configure(settings, **values)
    name = next(iter(values))
    with pytest.raises(ImproperlyConfigured) as raised:
        getattr(engine_settings, name)
    assert str(raised.value).startswith(message)
    errors = check_engine_settings()
    assert ids(errors) == ["memory_engine.E020"]
    assert errors[0].msg.startswith(message)


def test_a_credential_of_the_wrong_type_is_not_echoed(settings: Any) -> None:
    configure(settings, LLM={"BASE_URL": "http://llm/v1", "API_KEY": b"sk-very-secret"})
    with pytest.raises(ImproperlyConfigured, match=re.escape("['API_KEY'] must be a string; got bytes.")) as raised:
        _ = engine_settings.LLM
    assert "very-secret" not in str(raised.value)


def test_memory_engine_itself_must_be_a_dict(settings: Any) -> None:
    settings.MEMORY_ENGINE = [("HTTP_RETRIES", 1)]
    assert [e.msg for e in check_engine_settings()] == ["MEMORY_ENGINE must be a dict; got list."]
    with pytest.raises(ImproperlyConfigured):
        _ = engine_settings.HTTP_RETRIES


def test_a_typo_is_a_warning_naming_the_closest_setting(settings: Any) -> None:
    # The example: the threshold a typo leaves at its default, silently.
    configure(settings, DUPLICATE_TRESHOLD=0.9)
    assert engine_settings.DUPLICATE_THRESHOLD == 0.95
    warnings = check_engine_settings()
    assert ids(warnings) == ["memory_engine.W020"]
    assert warnings[0].msg == "MEMORY_ENGINE['DUPLICATE_TRESHOLD'] is not a memory_engine setting; it is ignored."
    assert warnings[0].hint == "Did you mean 'DUPLICATE_THRESHOLD'?"


def test_unknown_keys_of_the_nested_dicts_are_warnings_too(settings: Any) -> None:
    configure(settings, EMBEDDING={**engine_settings.EMBEDDING, "DIMENSION": 768},
              LLM={"base_url": "http://llm/v1", "modle": "m"}, COMPLETELY_UNRELATED=1)
    warnings = check_engine_settings()
    assert ids(warnings) == ["memory_engine.W020"] * 3
    assert {(w.msg.split(" is not")[0], w.hint) for w in warnings} == {
        ("MEMORY_ENGINE['EMBEDDING']['DIMENSION']", "Did you mean 'DIMENSIONS'?"),
        ("MEMORY_ENGINE['LLM']['MODLE']", "Did you mean 'MODEL'?"),
        ("MEMORY_ENGINE['COMPLETELY_UNRELATED']", "Remove it, or see the settings table in the README."),
    }


@pytest.mark.django_db
def test_manage_py_check_lists_bad_values_instead_of_crashing(settings: Any) -> None:
    """Other checks read these settings too: they step aside and E020 names every bad key."""
    configure(settings, RULE_FIRING_TIMEOUT="later", HTTP_MAX_SECONDS=[600], DUPLICATE_TRESHOLD=0.9)
    settings.Q_CLUSTER = {"name": "memory_engine", "timeout": 600, "retry": 900, "max_attempts": 1}
    with pytest.raises(SystemCheckError) as raised:
        call_command("check")
    report = str(raised.value)
    assert "MEMORY_ENGINE['RULE_FIRING_TIMEOUT'] must be a number; got 'later'." in report
    assert "MEMORY_ENGINE['HTTP_MAX_SECONDS'] must be a number; got [600]." in report
    assert report.count("memory_engine.E020") == 2
    assert "memory_engine.W020" in report and "DUPLICATE_THRESHOLD" in report


def test_every_setting_is_declared_once_and_its_table_is_generated() -> None:
    from tests.settings_table import BEGIN, END, SETTINGS_DOC, render, rewritten

    assert [s.name for s in SETTINGS] == list(DEFAULTS) == list(TYPES)
    assert len({s.name for s in SETTINGS}) == len(SETTINGS), "a setting declared twice"
    reference = SETTINGS_DOC.read_text()
    assert reference.count(BEGIN) == reference.count(END) == 1
    assert rewritten(reference, render(SETTINGS)) == reference, "docs/settings.md differs: run `make docs`"
    documented = set(re.findall(r"^\| `([A-Z0-9_]+)`", reference, re.MULTILINE))
    assert documented == set(DEFAULTS), sorted(documented ^ set(DEFAULTS))


def test_a_changed_declaration_changes_the_table() -> None:
    from dataclasses import replace

    from tests.settings_table import SETTINGS_DOC, render, rewritten

    reference = SETTINGS_DOC.read_text()
    changed = [replace(s, shown="`0`") if s.name == "TRASH_DAYS" else s for s in SETTINGS]
    assert rewritten(reference, render(changed)) != reference


@pytest.mark.django_db
def test_provider_aliases_resolve_in_one_cached_place_that_follows_the_settings(settings: Any) -> None:
    assert resolve_provider("rule_handler", "http") is HttpHandler
    hashing = "tests.providers.HashingEmbeddingProvider"
    assert resolve_provider("embedding", hashing).__name__ == "HashingEmbeddingProvider"
    with pytest.raises(KeyError):
        resolve_provider("rule_handler", hashing)  # handler types only, no dotted paths
    assert resolve_provider.cache_info().currsize >= 2
    configure(settings, EMBEDDING={**engine_settings.EMBEDDING, "PROVIDER": hashing, "DIMENSIONS": "16"})
    assert resolve_provider.cache_info().currsize == 0  # dropped with the settings
    provider = get_embedding_provider()
    assert type(provider).__name__ == "HashingEmbeddingProvider" and provider.dimensions == 16


def test_pdfium_without_its_package_is_check_e008(settings: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    configure(settings, PDF_EXTRACTOR="pdfium")
    assert check_pdf_extractor() == []  # installed with the dev extra
    monkeypatch.setattr("memory_engine.checks.find_spec", lambda name: None)
    errors = check_pdf_extractor()
    assert ids(errors) == ["memory_engine.E008"] and "pypdfium2" in errors[0].msg
    configure(settings, PDF_EXTRACTOR="pypdf")
    assert check_pdf_extractor() == []


def test_an_unknown_pdf_extractor_is_e020(settings: Any) -> None:
    configure(settings, PDF_EXTRACTOR="poppler")
    assert ids(check_engine_settings()) == ["memory_engine.E020"]
    assert check_pdf_extractor() == []  # steps aside until E020 is fixed
