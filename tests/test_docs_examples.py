"""Executed documentation: the request examples of README.md and docs/*.md run against a live
server, and each answer is checked against what the text shows.

* ``bash`` blocks that call the API with curl (``$BASE/api/v1/…``) run in bash, as written, with
  ``MEMORY_ENGINE_ADDRESS`` naming the live server and ``.demo-credentials.json`` holding a key;
  each curl is followed by a ``# → STATUS {…}`` line: the status and the part of the answer to
  expect (``…`` stands for what varies: ``"mem_…"`` is any id with that prefix).
* ``http`` blocks hold requests (``METHOD /api/v1/path``, then a JSON body) each optionally followed
  by ``→ STATUS {…}``; ids written as ``agt_…``, ``ms_…``, ``gen_…`` … are the test project's rows,
  or the ones earlier requests of the block created. ``ent_…(Lisbon)`` is the id of the row named
  Lisbon in an earlier answer (the answer itself or one of its ``results``).
  A comment line that names a schedule in quotes (``# … the "memory_engine: entity graph" schedule
  has read them``) runs that schedule's task there, as a deployment's scheduler would by then.
* Inline requests in the prose, ``POST /api/v1/x {field, other: …}``, may only name fields the
  OpenAPI schema declares for that operation.

The README's host walkthrough (``manage.py memory_engine_key`` in a fresh ``startproject``) is run by
tests/test_packaging.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from drf_spectacular.generators import SchemaGenerator

from .conftest import ROOT

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
ELLIPSIS = "…"
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")


@dataclass(frozen=True)
class Block:
    path: Path
    line: int
    language: str
    code: str

    @property
    def label(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def blocks() -> list[Block]:
    found = []
    for path in DOCS:
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"^```(\w*)\n(.*?)^```", text, re.S | re.M):
            found.append(Block(path, text[:match.start()].count("\n") + 1, match.group(1), match.group(2)))
    return found


BLOCKS = blocks()
CURL_BLOCKS = [b for b in BLOCKS if b.language == "bash" and "$BASE/api/" in b.code]
HTTP_BLOCKS = [b for b in BLOCKS if b.language == "http"]


# --------------------------------------------------------------------------- what the text shows


def _outside_strings(text: str) -> list[bool]:
    """For each character of ``text``: whether it stands outside a JSON string."""
    outside, in_string, escaped = [], False, False
    for char in text:
        outside.append(not in_string and char != '"')
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
    return outside


def strip_comment(line: str) -> str:
    """``line`` without a trailing ``# …`` comment outside JSON strings."""
    for index, (char, outside) in enumerate(zip(line, _outside_strings(line), strict=True)):
        if outside and char == "#":
            return line[:index].rstrip()
    return line


def lenient_json(text: str) -> Any:
    """JSON as the docs write it: ``…`` outside strings stands for "and more" and is dropped."""
    kept = "".join(char for char, outside in zip(text, _outside_strings(text), strict=True)
                   if not (outside and char == ELLIPSIS))
    cleaned = re.sub(r",\s*([}\]])", r"\1", kept)
    cleaned = re.sub(r"([\[{])\s*,", r"\1", cleaned)
    return json.loads(cleaned)


def matches(expected: Any, actual: Any) -> bool:
    """``actual`` holds what ``expected`` shows: its keys (recursively), list items by position,
    and strings with ``…`` as a wildcard."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(k in actual and matches(v, actual[k]) for k, v in expected.items())
    if isinstance(expected, list):
        return isinstance(actual, list) and len(actual) >= len(expected) and all(
            matches(e, a) for e, a in zip(expected, actual, strict=False))
    if isinstance(expected, str) and ELLIPSIS in expected:
        pattern = ".*".join(re.escape(part) for part in expected.split(ELLIPSIS))
        return isinstance(actual, str) and re.fullmatch(pattern, actual, re.S) is not None
    if isinstance(expected, float) and isinstance(actual, (int, float)):
        return abs(expected - actual) < 1e-6
    return bool(expected == actual)


def expectation(text: str) -> tuple[int, Any]:
    """``STATUS {…}`` (the part after the arrow) as (status, expected JSON or None)."""
    status, _, rest = text.strip().partition(" ")
    rest = "\n".join(strip_comment(line) for line in rest.splitlines()).strip()
    return int(status), (lenient_json(rest) if rest else None)


# --------------------------------------------------------------------------- the live server


@pytest.fixture
def documented(live_server: Any, transactional_db: Any) -> dict[str, Any]:
    """A project like `make run`'s: a key, a store, an agent writing into it, one of its generations."""
    from memory_engine.models import Generation
    from memory_engine.policy import SYSTEM
    from memory_engine.services.agents import agent_create
    from memory_engine.services.keys import api_key_create
    from memory_engine.services.stores import memory_store_save

    from .factories import ProjectFactory

    project = ProjectFactory(name="docs")
    key = api_key_create(project=project)[1]
    store = memory_store_save(project=project, name="docs-store")
    agent = agent_create(project=project, name="docs-agent", caller=SYSTEM, write_memory_store_id=store.pk,
                         knowledge_config={"memory_store_ids": [store.pk]})
    generation = Generation.objects.create(project=project, agent=agent, input_messages=[])
    return {"url": live_server.url, "key": key, "ids": {"ms_": store.pk, "agt_": agent.pk, "gen_": generation.pk}}


#: A curl call of a bash block: at a line's start or opening a command substitution ``$(curl …``.
CURL_CALL = re.compile(r"((?:^|\$\()\s*)curl ", re.M)


def numbered_curls(code: str) -> str:
    """``code`` with its n-th curl call (in the text's order) made ``doc_curl n …``: each call logs
    its status and body under its own number, so a call a condition skips leaves a gap instead of
    shifting the others' numbers."""
    counter = iter(range(1, 1000))
    return CURL_CALL.sub(lambda match: f"{match.group(1)}doc_curl {next(counter)} ", code)


def _run_curl_block(block: Block, log: Path, cwd: Path, url: str) -> None:
    for old in log.iterdir():
        old.unlink()
    prelude = ('doc_curl() { local n=$1; shift; '
               'command curl -sS -o "$DOCS_LOG/$n.body" -w "%{http_code}" "$@" > "$DOCS_LOG/$n.status"; '
               'cat "$DOCS_LOG/$n.body"; }\n')
    env = {**os.environ, "DOCS_LOG": str(log), "MEMORY_ENGINE_ADDRESS": url.removeprefix("http://"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    run = subprocess.run(["bash", "-euo", "pipefail", "-c", prelude + numbered_curls(block.code)], cwd=cwd, env=env,
                         capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, f"{block.label}: {run.stderr[-2000:]}"


@pytest.mark.parametrize("block", CURL_BLOCKS, ids=lambda b: b.label)
def test_curl_examples_answer_as_shown(block: Block, documented: dict[str, Any], tmp_path: Path) -> None:
    """Each block runs twice against the same server: the first run answers as the text shows; the
    second (over the first one's data, as a reader trying it again) runs through as well, each call
    it makes answering the status shown and its last call the answer shown (the ledger and counts
    in between grow, and a call a condition skips, such as creating what exists, is not made)."""
    shown = [expectation(line.split("→", 1)[1]) for line in block.code.splitlines()
             if line.strip().startswith("# →")]
    calls = len(CURL_CALL.findall(block.code))
    assert calls == len(shown), f"{block.label}: {calls} curl calls, {len(shown)} `# →` lines: annotate each call"
    (tmp_path / ".demo-credentials.json").write_text(json.dumps({"api_key": documented["key"]}))
    log = tmp_path / "calls"
    log.mkdir()
    for attempt in ("first run", "second run"):
        _run_curl_block(block, log, tmp_path, documented["url"])
        for index, (status, expected) in enumerate(shown, start=1):
            where = f"{block.label}, {attempt}, call {index}"
            if not (log / f"{index}.status").exists():
                assert attempt == "second run", f"{where}: not made"
                continue
            answered = int((log / f"{index}.status").read_text())
            body = (log / f"{index}.body").read_text()
            assert answered == status, f"{where}: answered {answered}, the text shows {status}: {body}"
            if expected is not None and (attempt == "first run" or index == len(shown)):
                assert matches(expected, json.loads(body)), f"{where}: {body[:600]}"


#: A comment line of an http block that names a schedule: its task runs before the next request.
SCHEDULE_LINE = re.compile(r'\s*#.*"(memory_engine: [^"]+)" schedule')
#: The method of the step that runs a schedule (its name in the path's place).
SCHEDULE = "SCHEDULE"


def _requests(code: str) -> list[tuple[str, str, str, str | None]]:
    """(method, path, body, expectation) of each request of an http block; a schedule to run is
    (SCHEDULE, its name, "", None)."""
    requests: list[list[str]] = []
    for line in code.splitlines():
        if schedule := SCHEDULE_LINE.match(line):
            requests.append([f"{SCHEDULE} {schedule.group(1)}", "", ""])
            requests.append(["", "", ""])  # what follows belongs to no request until the next one
        elif line.split(" ", 1)[0] in METHODS and line.split(" ", 1)[-1].startswith("/"):
            requests.append([line, "", ""])
        elif requests and line.lstrip().startswith(("→", "->")):
            requests[-1][2] = line.lstrip()[1:].lstrip(">").strip()
        elif requests and requests[-1][2]:
            requests[-1][2] += "\n" + line
        elif requests:
            requests[-1][1] += "\n" + strip_comment(line)
    parsed = []
    for head, body, expected in requests:
        if not head:
            continue
        method, path = head.split(" ", 1)
        if method == SCHEDULE:
            parsed.append((method, path, "", None))
            continue
        parsed.append((method, path.split()[0], body.strip(), expected.strip() or None))
    return parsed


def _fill(text: str, ids: dict[str, str], names: dict[tuple[str, str], str]) -> str:
    """``ms_…`` as the block's store (or the last one made), ``ent_…(Lisbon)`` as the row named Lisbon."""
    def filled(match: re.Match[str]) -> str:
        prefix, name = match.group(1), match.group(2)
        found = names.get((prefix, name)) if name is not None else ids.get(prefix)
        return found or match.group(0)

    return re.sub(r"\b([a-z]{2,4}_)" + ELLIPSIS + r"(?:\(([^)]+)\))?", filled, text)


def _remember_names(answer: Any, names: dict[tuple[str, str], str]) -> None:
    """The ids of the rows an answer names (itself, its ``results``), by prefix and name."""
    rows = [answer, *answer.get("results", [])] if isinstance(answer, dict) else []
    for row in rows:
        if isinstance(row, dict) and isinstance(row.get("id"), str) and isinstance(row.get("name"), str):
            names[(row["id"].split("_", 1)[0] + "_", row["name"])] = row["id"]


def _run_schedule(name: str) -> None:
    """What a deployment's scheduler runs under ``name`` (its task takes no arguments)."""
    from django.utils.module_loading import import_string
    from django_q.models import Schedule

    schedule = Schedule.objects.get(name=name)
    import_string(schedule.func)()


@pytest.mark.parametrize("block", HTTP_BLOCKS, ids=lambda b: b.label)
def test_http_examples_answer_as_shown(block: Block, documented: dict[str, Any]) -> None:
    ids = dict(documented["ids"])
    names: dict[tuple[str, str], str] = {}
    headers = {"Authorization": f"Bearer {documented['key']}"}
    requests = _requests(block.code)
    assert any(method != SCHEDULE for method, *_ in requests), f"{block.label}: no request in this http block"
    with httpx.Client(base_url=documented["url"], headers=headers, timeout=120) as client:
        for method, path, body, shown in requests:
            if method == SCHEDULE:
                _run_schedule(path)
                continue
            content = _fill(body, ids, names)
            response = client.request(method, _fill(path, ids, names),
                                      json=lenient_json(content) if content else None)
            label = f"{block.label}: {method} {path}"
            if shown is None:
                assert response.status_code < 400, f"{label}: {response.status_code} {response.text[:600]}"
            else:
                status, expected = expectation(shown)  # `gen_…` there: any id, made here or not
                assert response.status_code == status, f"{label}: {response.status_code} {response.text[:600]}"
                if expected is not None:
                    assert matches(expected, response.json()), f"{label}: {response.text[:600]}"
            answer = response.json() if response.content else {}
            if isinstance(answer, dict) and isinstance(answer.get("id"), str) and "_" in answer["id"]:
                ids[answer["id"].split("_", 1)[0] + "_"] = answer["id"]  # later requests use what it made
            _remember_names(answer, names)


# --------------------------------------------------------------------------- inline requests in prose


INLINE = re.compile(r"`(GET|POST|PUT|PATCH) (/api/v1/[^ `]+) \{([^`]*)\}`")


def _schema_fields() -> dict[tuple[str, str], set[str]]:
    schema = SchemaGenerator().get_schema(request=None, public=True)
    components = schema["components"]["schemas"]

    def properties(node: dict[str, Any]) -> set[str]:
        while "$ref" in node:
            node = components[node["$ref"].rsplit("/", 1)[-1]]
        return set(node.get("properties", {}))

    fields = {}
    for path, item in schema["paths"].items():
        for method, spec in item.items():
            content = spec.get("requestBody", {}).get("content", {}) if isinstance(spec, dict) else {}
            names: set[str] = set()
            for media in content.values():
                names |= properties(media.get("schema", {}))
            fields[(method.upper(), re.sub(r"\{[^}]+\}", "{}", path))] = names
    return fields


def test_inline_requests_name_only_declared_fields() -> None:
    fields = _schema_fields()
    wrong = []
    for path in DOCS:
        for match in INLINE.finditer(path.read_text(encoding="utf-8")):
            method, url, inside = match.groups()
            route = re.sub(r"\{[^}]+\}|[a-z]{2,4}_" + ELLIPSIS, "{}", url.split("?")[0])
            declared = fields.get((method, route))
            if declared is None:
                wrong.append(f"{path.name}: {method} {url}: no such operation")
                continue
            named = {re.match(r"\s*\"?(\w+)", part).group(1)  # type: ignore[union-attr]
                     for part in re.split(r",(?![^{\[]*[}\]])", inside) if re.match(r"\s*\"?\w", part)}
            if unknown := sorted(name.rstrip("?") for name in named if name.rstrip("?") not in declared):
                wrong.append(f"{path.name}: {method} {url} names {unknown}, not in {sorted(declared)}")
    assert not wrong, "\n".join(wrong)


def test_every_request_block_is_executed() -> None:
    """A block that shows a request to the API is an ``http`` block or a curl block with ``$BASE``:
    a plain or ``json`` block starting with ``METHOD /api/`` would never run."""
    request = re.compile(r"\s*(GET|POST|PUT|PATCH|DELETE) /api/")
    stray = [b.label for b in BLOCKS if b.language != "http" and request.match(b.code)]
    stray += [b.label for b in BLOCKS if b.language == "bash" and "curl " in b.code and "/api/" in b.code
              and "$BASE" not in b.code and "manage.py" not in b.code]
    assert not stray, f"request examples that do not run: {stray}"
