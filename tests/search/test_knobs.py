"""Each search knob is declared once (memory_engine.conf.SEARCH_KNOBS: name, type, range, default,
doc). The REST request's fields, the admin playground's form, the search's checks, a transform
config's checks and the settings' are compared here with that declaration, value by value at the
edges of each range, so a second declaration with another range cannot creep back."""

from __future__ import annotations

import math
from typing import Any

import pytest
from django import forms
from rest_framework import serializers

from memory_engine.admin.console import PLAYGROUND_KNOBS, PlaygroundForm
from memory_engine.api.search import KnowledgeSearchRequestSerializer
from memory_engine.conf import SEARCH_KNOBS, SETTINGS, Knob
from memory_engine.exceptions import KnowledgeConfigInvalid, SearchParameterInvalid, TransformConfigInvalid
from memory_engine.knowledge_config import normalize_knowledge_config
from memory_engine.ranking_knobs import CONFIG_KNOBS, validate_ranking_knobs
from memory_engine.selectors.search.validation import KNOB_ERRORS, validate_search_knobs
from memory_engine.setting_types import InvalidSetting

KNOBS = list(SEARCH_KNOBS.values())
REQUEST_KNOBS = [knob for knob in KNOBS if knob.request]
NUMBER_KNOBS = [knob for knob in KNOBS if knob.kind is not bool]


def probes(knob: Knob) -> list[tuple[Any, bool]]:
    """(value, in range) pairs: each bound and just past it, a value inside, the wrong types."""
    if knob.kind is bool:
        return [(True, True), (False, True), (1, False), (None, False), ("true", False)]
    step = 1 if knob.kind is int else 0.001
    found: list[tuple[Any, bool]] = [(True, False), ("5", False), (math.nan, False), (math.inf, False),
                                     (None, False)]
    if knob.kind is int:
        found.append((2.0, False))  # an integral float is not an integer knob's value
    if knob.low is not None:
        found += [(knob.low, not knob.low_open), (knob.low - step, False), (knob.low + step, True)]
    if knob.high is not None:
        found += [(knob.high, True), (knob.high + step, False), (knob.high - step, True)]
    if knob.high is None:
        found.append((10 ** 9, True))
    return found


@pytest.mark.parametrize("knob", KNOBS, ids=lambda knob: knob.name)
def test_the_declaration_reads_its_own_range(knob: Knob) -> None:
    for value, inside in probes(knob):
        assert knob.fits(value) is inside, (knob.name, value)


def test_the_search_checks_every_number_a_request_may_set() -> None:
    assert set(KNOB_ERRORS) == {knob.name for knob in REQUEST_KNOBS if knob.kind is not bool}


@pytest.mark.parametrize("knob", [knob for knob in REQUEST_KNOBS if knob.kind is not bool], ids=lambda k: k.name)
def test_the_search_checks_are_the_declared_range(knob: Knob) -> None:
    for value, inside in probes(knob):
        if value is None:
            inside = knob.nullable  # unset: the setting's value, or no such filter
        try:
            validate_search_knobs(**{knob.name: value})
        except SearchParameterInvalid as exc:
            assert not inside, (knob.name, value)
            assert exc.details["min"] == knob.low and exc.details["max"] == knob.high
            assert exc.details["exclusive_min"] is knob.low_open
        else:
            assert inside, (knob.name, value)


def test_a_config_holds_exactly_the_config_knobs() -> None:
    assert list(CONFIG_KNOBS) == [knob.name for knob in KNOBS if knob.config]
    with pytest.raises(TransformConfigInvalid):
        validate_ranking_knobs({"limit": 10})  # a request's knob, not a config's


@pytest.mark.parametrize("knob", list(CONFIG_KNOBS.values()), ids=lambda knob: knob.name)
def test_a_configs_checks_are_the_declared_range(knob: Knob) -> None:
    for value, inside in probes(knob):
        try:
            validate_ranking_knobs({knob.name: value})
        except TransformConfigInvalid as exc:
            assert not inside, (knob.name, value)
            assert exc.message == f"`search.{knob.name}` must be {knob.expected}."
        else:
            assert inside, (knob.name, value)


@pytest.mark.parametrize("knob", [knob for knob in KNOBS if knob.setting], ids=lambda knob: knob.name)
def test_a_settings_check_type_and_default_are_the_knobs(knob: Knob) -> None:
    setting = next(s for s in SETTINGS if s.name == knob.setting)
    assert setting.default == knob.default and knob.fits(setting.default)
    assert setting.coerce == knob.coerce
    for value, inside in probes(knob):
        if isinstance(value, str) or value is None:
            continue  # a setting may come from the environment as a string; None is not a knob's value
        if knob.kind is bool and value == 1:
            inside = True  # a setting reads 0 and 1 as booleans, as every boolean setting does
        if knob.kind is int and value == 2.0:
            inside = True  # and an integral float as an integer
        try:
            setting.coerce(value)
        except InvalidSetting as exc:
            assert not inside, (knob.name, value)
            # the type's own words when the type is wrong (NaN is not a number), else the range's
            assert exc.expected in (knob.expected, "True or False", "a number", "an integer")
        else:
            assert inside, (knob.name, value)


def test_every_search_setting_that_is_a_knob_is_derived_from_it() -> None:
    knob_settings = {knob.setting for knob in KNOBS if knob.setting}
    assert knob_settings <= {s.name for s in SETTINGS}
    for setting in SETTINGS:
        if setting.name in knob_settings:
            knob = next(k for k in KNOBS if k.setting == setting.name)
            assert setting == knob.setting_row(setting.meaning)


@pytest.mark.parametrize("knob", REQUEST_KNOBS, ids=lambda knob: knob.name)
def test_the_rest_field_is_the_declaration(knob: Knob) -> None:
    field = KnowledgeSearchRequestSerializer().fields[knob.name]
    kind = {bool: serializers.BooleanField, int: serializers.IntegerField, float: serializers.FloatField}[knob.kind]
    assert isinstance(field, kind) and not field.required
    assert field.allow_null is knob.nullable
    assert field.default == (None if knob.nullable else knob.default)
    assert field.help_text == knob.help_text
    if knob.kind is not bool:
        # the schema shows the range; the search checks it and answers with the knob's own code
        assert (field.min_value, field.max_value) == (None if knob.low_open else knob.low, knob.high)
        assert not field.validators
        for value, _inside in probes(knob):
            if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
                data = KnowledgeSearchRequestSerializer(data={knob.name: value})
                assert data.is_valid(), (knob.name, value, data.errors)


@pytest.mark.parametrize("name", PLAYGROUND_KNOBS)
def test_the_playground_field_is_the_declaration(name: str) -> None:
    knob = SEARCH_KNOBS[name]
    field = PlaygroundForm.base_fields[name]
    assert isinstance(field, forms.IntegerField if knob.kind is int else forms.FloatField) and not field.required
    for value, inside in probes(knob):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            continue  # a form reads text
        if knob.kind is int and isinstance(value, float) and value.is_integer():
            inside = True  # "2.0" typed into a form is 2
        try:
            field.clean(str(value))
        except forms.ValidationError:
            assert not inside, (name, value)
        else:
            assert inside, (name, value)
    assert field.clean("") is None  # blank: the search's default


def test_an_agents_min_relevance_has_the_declared_range() -> None:
    knob = SEARCH_KNOBS["min_relevance"]
    for value, inside in probes(knob):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            continue
        try:
            normalize_knowledge_config({"min_relevance": value})
        except KnowledgeConfigInvalid as exc:
            assert not inside, value
            assert exc.message == f"`knowledge_config.min_relevance` must be {knob.expected}."
        else:
            assert inside, value
