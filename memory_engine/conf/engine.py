"""The settings object: :data:`SETTINGS` (every key, in the order of docs/settings.md),
:data:`engine_settings` (read lazily, coerced and cached on first read) and the caches that
follow the settings (:func:`reloads_with_settings`, dropped on ``setting_changed``)."""

from __future__ import annotations

import copy
import difflib
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed

from memory_engine.setting_types import Coerce, InvalidSetting

from .declaration import SECTIONS, Setting
from .operations import OPERATION_SETTINGS
from .reading import READ_SETTINGS
from .writing import WRITE_SETTINGS

#: Every key, each declared once, in the order of docs/settings.md.
SETTINGS: tuple[Setting, ...] = WRITE_SETTINGS + READ_SETTINGS + OPERATION_SETTINGS

#: Every key's default and its type, from :data:`SETTINGS`.
DEFAULTS: dict[str, Any] = {s.name: s.default for s in SETTINGS}
TYPES: dict[str, Coerce] = {s.name: s.coerce for s in SETTINGS}

#: Nested dicts merged key by key with their defaults rather than replaced whole.
NESTED = ("EMBEDDING",)


class EngineSettings:
    """Attribute access to MEMORY_ENGINE with defaults and declared types, e.g.
    ``engine_settings.DUPLICATE_THRESHOLD``."""

    def __init__(self) -> None:
        self._cache: dict[str, Any] = {}

    @property
    def user_settings(self) -> dict[str, Any]:
        configured = getattr(settings, "MEMORY_ENGINE", None) or {}
        if not isinstance(configured, dict):
            raise ImproperlyConfigured(f"MEMORY_ENGINE must be a dict; got {type(configured).__name__}.")
        return configured

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in DEFAULTS:
            raise AttributeError(f"Invalid memory_engine setting: {name!r}")
        if name in self._cache:
            return self._cache[name]
        value = copy.deepcopy(DEFAULTS[name])
        if name in self.user_settings:
            user_value = self.user_settings[name]
            if name in NESTED and isinstance(value, dict) and isinstance(user_value, dict):
                value.update(user_value)
            else:
                value = user_value
        try:
            value = TYPES[name](value)
        except InvalidSetting as exc:
            raise ImproperlyConfigured(exc.describe(name)) from None
        self._cache[name] = value
        return value

    def reload(self) -> None:
        self._cache.clear()

    def invalid_settings(self) -> list[str]:
        """What is wrong with each configured value that does not fit its type (E020)."""
        try:
            configured = self.user_settings
        except ImproperlyConfigured as exc:
            return [str(exc)]
        problems = []
        for name in DEFAULTS:
            if name in configured:
                try:
                    getattr(self, name)
                except ImproperlyConfigured as exc:
                    problems.append(str(exc))
        return problems

    def unknown_settings(self) -> list[tuple[str, str | None]]:
        """``(where, closest known key or None)`` for each configured key that is not a setting
        (W020): top-level keys and the keys of the nested dicts (EMBEDDING, LLM)."""
        try:
            configured = self.user_settings
        except ImproperlyConfigured:
            return []  # E020 says so
        unknown = _unknown(configured, DEFAULTS, "MEMORY_ENGINE")
        for name, (types, any_case) in SECTIONS.items():
            nested = configured.get(name)
            if isinstance(nested, dict):
                if any_case:
                    nested = {str(key).upper(): item for key, item in nested.items()}
                unknown += _unknown(nested, types, f"MEMORY_ENGINE[{name!r}]")
        return unknown


def _unknown(configured: dict[str, Any], known: Any, where: str) -> list[tuple[str, str | None]]:
    known = list(known)
    return [
        (f"{where}[{key!r}]", next(iter(difflib.get_close_matches(str(key), known, n=1)), None))
        for key in configured if key not in known
    ]


engine_settings = EngineSettings()

# --- caches that follow the settings -------------------------------------------------------------

_reload_hooks: list[Callable[[], Any]] = []


def reloads_with_settings(clear: Callable[[], Any]) -> Callable[[], Any]:
    """Register ``clear`` (a cache's reset) to run whenever MEMORY_ENGINE changes, so nothing
    built from the settings outlives them (``override_settings`` in tests, reloads)."""
    _reload_hooks.append(clear)
    return clear


def _reload(*, setting: str, **kwargs: Any) -> None:
    if setting == "MEMORY_ENGINE":
        engine_settings.reload()
        for clear in _reload_hooks:
            clear()


setting_changed.connect(_reload)


def embedding_dimensions() -> int:
    """The configured vector dimension; shapes the vector columns (models and migrations)."""
    return engine_settings.EMBEDDING["DIMENSIONS"]
