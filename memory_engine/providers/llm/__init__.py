"""The one chat-completion interface: an OpenAI-compatible ``POST {BASE_URL}/chat/completions``.

Covers OpenAI, Ollama's ``/v1``, vLLM, llama.cpp server and LiteLLM. Configured in
``MEMORY_ENGINE["LLM"] = {"BASE_URL", "API_KEY", "MODEL", "TIMEOUT"}``; ``None`` (the
default) means no model is configured and :func:`get_llm_provider` answers ``None``.

Used by the built-in memory rule extractor and the same-fact judge. Calls are
tool-less; every failure is raised as an :class:`LLMError` (LLM_NOT_CONFIGURED, LLM_TIMEOUT,
LLM_HTTP_ERROR or LLM_BAD_RESPONSE).
"""

from __future__ import annotations

from typing import Any

from memory_engine.conf import engine_settings
from memory_engine.exceptions import LLMBadResponse, LLMError, LLMHTTPError, LLMNotConfigured, LLMTimeout
from memory_engine.providers.http import ProviderHTTPError, post_json
from memory_engine.text import content_text

__all__ = ["LLMError", "LLMProvider", "get_llm_provider", "require_llm_provider"]

DEFAULT_TIMEOUT = 30.0


class LLMProvider:
    """A tool-less chat completion against one OpenAI-compatible endpoint."""

    def __init__(self, *, base_url: str, api_key: str = "", model: str = "", timeout: float = DEFAULT_TIMEOUT,
                 retries: int | None = None, guarded: bool = False) -> None:
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.model = model
        self.timeout = float(timeout)
        self.retries = engine_settings.HTTP_RETRIES if retries is None else int(retries)
        #: The endpoint did not come from the deployment's settings: the outbound guard applies.
        self.guarded = guarded

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    def complete(
        self,
        messages: list[dict[str, Any]],
        *,
        model: str | None = None,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        timeout: float | None = None,
    ) -> str:
        """The assistant message's text for ``messages`` (OpenAI chat format)."""
        chosen = model or self.model
        if not chosen:
            raise LLMNotConfigured("No model named: set MEMORY_ENGINE['LLM']['MODEL'] or the rule's `model`.")
        payload: dict[str, Any] = {"model": chosen, "messages": messages, "temperature": temperature,
                                   "stream": False}
        if max_tokens is not None:
            payload["max_tokens"] = max_tokens
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        wait = float(timeout if timeout is not None else self.timeout)
        try:
            answer = post_json(self.url, payload, headers=headers, timeout=wait, retries=self.retries,
                               guarded=self.guarded)
        except ProviderHTTPError as exc:
            if exc.status is not None and exc.status < 400:
                raise LLMBadResponse(f"The model endpoint gave an unusable answer: {exc}",
                                     details={"url": self.url}) from exc
            timed_out = exc.status is None and "timed out" in str(exc)
            error = LLMTimeout if timed_out else LLMHTTPError
            raise error(
                f"The model endpoint {'timed out' if timed_out else 'failed'}: {exc}",
                details={"url": self.url, "status": exc.status},
            ) from exc
        return _message_text(answer, self.url)

    def __repr__(self) -> str:
        return f"<LLMProvider {self.url} model={self.model!r}>"


def _message_text(answer: Any, url: str) -> str:
    try:
        content = answer["choices"][0]["message"]["content"]
    except (KeyError, IndexError, TypeError):
        raise LLMBadResponse("The model endpoint's answer has no choices[0].message.content.",
                             details={"url": url}) from None
    if isinstance(content, list):  # some servers answer content parts
        content = content_text(content, separator="")
    if not isinstance(content, str):
        raise LLMBadResponse("The model endpoint answered a non-text message.", details={"url": url})
    return content


def _upper(config: dict[str, Any] | None) -> dict[str, Any]:
    return {str(k).upper(): v for k, v in (config or {}).items() if v not in (None, "")}


def get_llm_provider(overrides: dict[str, Any] | None = None) -> LLMProvider | None:
    """The configured provider, with per-call ``overrides`` (BASE_URL, API_KEY, MODEL,
    TIMEOUT, RETRIES; any case) on top; ``None`` when no BASE_URL is configured.

    Overrides that send the call elsewhere (a BASE_URL other than the deployment's) never
    inherit the deployment's API_KEY, only their own, and the outbound guard checks their
    address (memory_engine.guards). Which overrides a memory rule may set at all is
    ``LLM_OVERRIDABLE`` (checked by the rule services).
    """
    deployment = engine_settings.LLM or {}  # upper-case keys, empty values dropped (conf)
    requested = _upper(overrides)
    config = {**deployment, **requested}
    if not config.get("BASE_URL"):
        return None
    moved = str(config["BASE_URL"]).rstrip("/") != str(deployment.get("BASE_URL") or "").rstrip("/")
    if moved:
        config["API_KEY"] = requested.get("API_KEY", "")
    return LLMProvider(
        base_url=str(config["BASE_URL"]),
        api_key=str(config.get("API_KEY") or ""),
        model=str(config.get("MODEL") or ""),
        timeout=float(config.get("TIMEOUT") or DEFAULT_TIMEOUT),
        retries=config.get("RETRIES"),
        guarded=moved,
    )


def require_llm_provider(overrides: dict[str, Any] | None = None) -> LLMProvider:
    """Like :func:`get_llm_provider`, raising ``LLMNotConfigured`` instead of ``None``."""
    provider = get_llm_provider(overrides)
    if provider is None:
        raise LLMNotConfigured(
            "No language model is configured; set MEMORY_ENGINE['LLM'] = {'BASE_URL': ..., 'MODEL': ...}."
        )
    return provider
