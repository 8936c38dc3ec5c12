"""App configuration: connects signal receivers, registers system checks and the fork handler."""

from django.apps import AppConfig


class MemoryEngineConfig(AppConfig):
    name = "memory_engine"
    label = "memory_engine"
    verbose_name = "Memory engine"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import checks, signals  # noqa: F401  (registration side effects)
        from .models.tenancy import join_tenant_rows_by_project

        join_tenant_rows_by_project(self.get_models())
        from .fork_safety import register_fork_handler
        from .services.rules import enqueue_memory_rules

        signals.generation_completed.connect(enqueue_memory_rules, dispatch_uid="memory_engine.rules")
        from django.db.models.signals import post_migrate

        from .lexical import rebuild_stale_after_migrate
        from .queue import ensure_schedules

        post_migrate.connect(ensure_schedules, sender=self, dispatch_uid="memory_engine.schedules")
        post_migrate.connect(rebuild_stale_after_migrate, sender=self, dispatch_uid="memory_engine.lexical")
        # A forked process (django-q2's workers, gunicorn --preload) opens its own connections.
        register_fork_handler()
