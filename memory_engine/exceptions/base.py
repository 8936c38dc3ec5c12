"""The base class of every memory_engine error, and the list of its subclasses."""

from __future__ import annotations

from typing import Any, ClassVar


class MemoryEngineError(Exception):
    """Base class: ``code`` is stable and documented, ``message`` says what to do next.

    ``ERROR`` is also the code of an error Django or DRF answers with a status no class names.
    """

    code: ClassVar[str] = "ERROR"
    status_code: ClassVar[int] = 400
    default_message: ClassVar[str] = "The request could not be processed."

    def __init__(self, message: str | None = None, *, details: dict[str, Any] | None = None) -> None:
        self.message = message or self.default_message
        self.details = details or {}
        super().__init__(self.message)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(code={self.code!r}, message={self.message!r})"

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "message": self.message, "details": self.details}


_PACKAGE = __name__.rpartition(".")[0] + "."


def error_classes() -> list[type[MemoryEngineError]]:
    """Every class of this package, the base first (the codes are ``{cls.code for cls in ...}``)."""
    found: list[type[MemoryEngineError]] = []
    pending: list[type[MemoryEngineError]] = [MemoryEngineError]
    while pending:
        cls = pending.pop(0)
        if cls not in found and cls.__module__.startswith(_PACKAGE):
            found.append(cls)
            pending.extend(cls.__subclasses__())
    return found
