"""Recording an agent's turns: ``record_generation`` and ``complete_generation``.

Completing a generation (status ``completed`` or ``failed``) sends
``memory_engine.signals.generation_completed`` once the transaction commits; the
memory-rule receiver only enqueues work, so completing stays fast.
"""

from __future__ import annotations

from typing import Any

from django.db import transaction
from django.utils import timezone

from memory_engine.exceptions import GenerationAlreadyCompleted, GenerationNotFound, RuleNotFound, ValidationFailed
from memory_engine.models import Agent, Generation, MemoryRule
from memory_engine.models.agents import GenerationStatus
from memory_engine.signals import generation_completed
from memory_engine.text import contains_nul, validate_messages

FINAL_STATUSES = (GenerationStatus.COMPLETED, GenerationStatus.FAILED)


def validate_output(output: Any) -> str | None:
    if output is None:
        return None
    if not isinstance(output, str):
        raise ValidationFailed("`output` must be a string.", details={"field": "output"})
    if contains_nul(output):
        raise ValidationFailed("`output` must not contain NUL characters.", details={"field": "output"})
    return output


def _check_status(status: str) -> None:
    if status not in FINAL_STATUSES:
        raise ValidationFailed("`status` must be `completed` or `failed`.", details={"status": status})


@transaction.atomic
def record_generation(
    *,
    agent: Agent,
    input_messages: list[dict[str, Any]] | None = None,
    output: str | None = None,
    status: str = GenerationStatus.RUNNING,
    initiator: Generation | None = None,
    started_by_rule: MemoryRule | None = None,
) -> Generation:
    """Record a turn of ``agent``; with a final ``status`` it is completed in the same call.

    ``initiator`` is the generation that caused this one (a rule handler's generation
    names the source turn); ``started_by_rule`` marks a rule handler's own turn, which
    never fires rules.
    """
    if initiator is not None and initiator.project_id != agent.project_id:
        raise GenerationNotFound("The initiator belongs to another project.")
    if started_by_rule is not None and started_by_rule.store.project_id != agent.project_id:
        raise RuleNotFound("The rule belongs to another project.")
    generation = Generation.objects.create(
        project_id=agent.project_id,
        agent=agent,
        input_messages=[] if input_messages is None else validate_messages(input_messages, field="input_messages"),
        output=validate_output(output) or "",
        initiator=initiator,
        started_by_rule=started_by_rule,
    )
    if status != GenerationStatus.RUNNING:
        _check_status(status)
        generation = complete_generation(generation=generation, output=output, status=status)
    return generation


@transaction.atomic
def complete_generation(
    *, generation: Generation, output: str | None = None, status: str = GenerationStatus.COMPLETED
) -> Generation:
    """Store the reply and final status; ``generation_completed`` is sent on commit.

    A generation completes once: completing it again raises ``Conflict``
    (GENERATION_ALREADY_COMPLETED).
    """
    _check_status(status)
    output = validate_output(output)
    values = {"status": status, "output": output if output is not None else generation.output,
              "completed_at": timezone.now()}
    # A conditional UPDATE: of two concurrent completions exactly one wins.
    updated = Generation.objects.filter(project_id=generation.project_id, pk=generation.pk,
                                        status=GenerationStatus.RUNNING).update(**values)
    if not updated:
        raise GenerationAlreadyCompleted("This generation is already completed.",
                                         details={"generation_id": generation.pk})
    for name, value in values.items():
        setattr(generation, name, value)
    generation_id, project_id = generation.pk, generation.project_id
    transaction.on_commit(
        lambda: generation_completed.send(sender=Generation, generation_id=generation_id, project_id=project_id),
        robust=True,
    )
    return generation
