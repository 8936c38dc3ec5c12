"""JSON objects given as text or already parsed: the one check behind the API's
``JSONObjectField`` and ``?tags=`` parameters and the operator console's JSON inputs."""

from __future__ import annotations

import json
from typing import Any


def parse_json_object(value: Any) -> dict[str, Any]:
    """``value`` (a dict, or JSON text of one) as a dict.

    Raises ``json.JSONDecodeError`` for text that is not JSON and ``ValueError`` for JSON
    that is not an object (an array, a string, a number, null).
    """
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, dict):
        raise ValueError("Not a JSON object.")
    return value
