"""manage.py memory_engine_embedding_model status | register NAME | build | switch | discard

Change the embedding model while search keeps serving (docs/embeddings.md):

    register NAME   probe the model MEMORY_ENGINE['EMBEDDING_MODELS'][NAME] and give it side storage
    build           embed every memory content and chunk into it (progress bars), then index it
    switch          embed what was written since, then make it the active model in one transaction
    discard         drop the side storage of a model being built or ready
    status          the registered models and how many rows each holds a vector for
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from memory_engine.exceptions import MemoryEngineError
from memory_engine.management.progress import ProgressBar
from memory_engine.models import EmbeddingModel
from memory_engine.services.embedding_models import (
    embedding_model_build,
    embedding_model_discard,
    embedding_model_register,
    embedding_model_switch,
    embedding_models_status,
    next_model,
)


class Command(BaseCommand):
    help = "Register, build and switch to another embedding model without stopping search."
    # Runs while the checks report EMBEDDING changed outside the registry: it is the fix.
    requires_system_checks: list[str] = []

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("action", choices=["status", "register", "build", "switch", "discard"])
        parser.add_argument("name", nargs="?", default="",
                            help="register: a key of MEMORY_ENGINE['EMBEDDING_MODELS'] (or EMBEDDING).")
        parser.add_argument("--batch-size", type=int, default=None)

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            getattr(self, f"do_{options['action']}")(options)
        except MemoryEngineError as exc:
            raise CommandError(f"{exc.code}: {exc.message}") from exc

    def _next(self, options: dict[str, Any]) -> EmbeddingModel:
        model = next_model()
        if model is None or (options["name"] and options["name"] != model.name):
            raise CommandError("No such model is registered (run `register NAME` first, see `status`).")
        return model

    def do_status(self, options: dict[str, Any]) -> None:
        for row in embedding_models_status():
            rows = ", ".join(f"{kind} {c['with_vector']}/{c['total']}" for kind, c in row["rows"].items())
            self.stdout.write(f"{row['state']:<9} {row['name']:<16} {row['model']} ({row['dimensions']} "
                              f"{row['storage']}) {rows}")

    def do_register(self, options: dict[str, Any]) -> None:
        if not options["name"]:
            raise CommandError("register needs the model's NAME in MEMORY_ENGINE['EMBEDDING_MODELS'].")
        model = embedding_model_register(name=options["name"], registered_by="manage.py")
        self.stdout.write(self.style.SUCCESS(
            f"Registered {model.model}: {model.dimensions} dimensions as {model.storage}. "
            f"Next: `memory_engine_embedding_model build {model.name}`."))

    def do_build(self, options: dict[str, Any]) -> None:
        model = self._next(options)
        bars: dict[str, ProgressBar] = {}

        def on_start(kind: str, total: int) -> None:
            if kind in bars:
                bars[kind].close()
            bars[kind] = ProgressBar.for_command(self, total, label=f"{kind:<16}")

        report = embedding_model_build(model=model, batch_size=options["batch_size"], on_start=on_start,
                                       on_progress=lambda kind, count: bars[kind].advance(count))
        for bar in bars.values():
            bar.close()
        self.stdout.write(f"{'kind':<16} {'embedded':>9} {'failed':>7}")
        for kind in report.embedded:
            self.stdout.write(f"{kind:<16} {report.embedded[kind]:>9} {report.failed[kind]:>7}")
        self.stdout.write(self.style.SUCCESS(
            f"{model.model} is ready. Next: `memory_engine_embedding_model switch {model.name}`."))

    def do_switch(self, options: dict[str, Any]) -> None:
        model = self._next(options)
        report = embedding_model_switch(model=model, batch_size=options["batch_size"])
        self.stdout.write(self.style.SUCCESS(
            f"{model.model} is the active model (was {report.previous or 'none'}); {report.caught_up} rows "
            f"caught up, writes held for {report.lock_ms:.0f} ms. Set MEMORY_ENGINE['EMBEDDING'] to it "
            "when you next deploy."))

    def do_discard(self, options: dict[str, Any]) -> None:
        model = self._next(options)
        embedding_model_discard(model=model)
        self.stdout.write(self.style.SUCCESS(f"Discarded {model.model} and its side storage."))
