"""Schema fuzzing: schemathesis drives every operation of the live app (WSGI, in-process)
with generated requests, authenticated with a read-write key of a project that holds data
of every kind (path ids point at real rows). Checks: no 5xx, bodies conform to the schema,
content types conform, and every 4xx body carries ``code`` and ``message``.

Budget: FUZZ_EXAMPLES examples per operation (env MEMORY_ENGINE_FUZZ_EXAMPLES), derandomized
so a failure reproduces (raise it locally for a deeper run, e.g. 200).
"""

from __future__ import annotations

import os
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from django.core import signals
from django.core.wsgi import get_wsgi_application
from django.db import close_old_connections
from hypothesis import HealthCheck, Phase
from hypothesis import settings as hypothesis_settings
from schemathesis.specs.openapi import checks as openapi_checks

from .test_isolation_matrix import OPERATIONS, OWN_NAMES, load_schema, path_kind
from .world import World, build_world

FUZZ_EXAMPLES = int(os.environ.get("MEMORY_ENGINE_FUZZ_EXAMPLES", "8"))

schema = schemathesis.openapi.from_dict(load_schema())
schema.app = get_wsgi_application()

OPS_BY_KEY = {(op.method, op.path): op for op in OPERATIONS}


def error_bodies_carry_code(ctx: Any, response: Any, case: Any) -> bool | None:
    """Every 4xx answer is ``{"code", "message", ...}``."""
    if 400 <= response.status_code < 500:
        try:
            body = response.json()
        except ValueError:
            raise AssertionError(f"{response.status_code} answer is not JSON: {response.content[:200]!r}") from None
        assert isinstance(body, dict) and isinstance(body.get("code"), str) and isinstance(
            body.get("message"), str
        ), f"{response.status_code} answer lacks code/message: {body!r}"[:500]
    return None


CHECKS = [
    schemathesis.checks.not_a_server_error,
    openapi_checks.response_schema_conformance,
    openapi_checks.content_type_conformance,
    error_bodies_carry_code,
]


@pytest.fixture
def fuzz_world(db: Any, hashing_embedder: None, settings: Any) -> Iterator[World]:
    # Rules fire inline on completion: point them nowhere and do not retry.
    settings.MEMORY_ENGINE = {**settings.MEMORY_ENGINE, "HTTP_RETRIES": 0}
    # Like Django's test Client: the WSGI handler must not close the test transaction's connection.
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    try:
        yield build_world("fuzz")
    finally:
        signals.request_started.connect(close_old_connections)
        signals.request_finished.connect(close_old_connections)


@schema.parametrize()
@hypothesis_settings(max_examples=FUZZ_EXAMPLES, deadline=None, derandomize=True, database=None,
                     phases=[Phase.explicit, Phase.generate],
                     suppress_health_check=list(HealthCheck))
def test_fuzz(case: Any, fuzz_world: World) -> None:
    op = OPS_BY_KEY.get((case.method.upper(), case.path))
    if op is not None and op.keyed:
        # Half of the path ids name real rows of the caller's project, the rest are generated.
        for name in op.path_params:
            kind = path_kind(op, name)
            if kind and case.path_parameters and zlib.crc32(repr(case.body).encode()) % 2 == 0:
                case.path_parameters[name] = OWN_NAMES[name] if kind == "name" else fuzz_world.first(kind)
    headers = {"Authorization": f"Bearer {fuzz_world.key}"} if op is None or op.keyed else {}
    case.call_and_validate(headers=headers, checks=CHECKS)
