"""Run by tests/search/test_restart.py in a fresh process against a server it restarts:

    python -m tests.search.restart_probe setup|search     (DATABASE_URL names the server)

``setup`` migrates, writes documents and memories (after the index build, so all of them
live in pg_textsearch's memtable), then searches; ``search`` only searches. Both print
the ranked ids of every query as JSON on the last line of stdout.
"""

from __future__ import annotations

import json
import os
import random
import sys

QUERIES = ["volcano river", "amber basil cedar", "fjord", "delta echo foxtrot golf", "quebec"]
WORDS = ("alpha bravo charlie delta echo foxtrot golf hotel india juliet kilo lima mike november oscar papa "
         "quebec romeo sierra tango uniform victor whiskey xray yankee zulu amber basil cedar dune ember "
         "fjord grove heath iris jade volcano river").split()


def main(phase: str) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "example_project.settings")
    import django

    django.setup()
    from django.core.management import call_command

    from memory_engine.models import MemoryStore, Project
    from memory_engine.selectors.search import SearchRequest, knowledge_search
    from tests.search.helpers import make_document, write

    if phase == "setup":
        call_command("migrate", verbosity=0, interactive=False)
        rng = random.Random(11)
        project = Project.objects.create(name="restart")
        store = MemoryStore.objects.create(project=project, name="facts")
        for i in range(40):
            make_document(project, f"/docs/{i}.txt", [" ".join(rng.sample(WORDS, 8)) for _ in range(5)])
        for _ in range(60):
            write(store, " ".join(rng.sample(WORDS, 6)))
    project = Project.objects.get(name="restart")
    store = MemoryStore.objects.get(project=project, name="facts")
    answers = {}
    for query in QUERIES:
        for channels in (("lexical",), ("vector", "lexical")):
            result = knowledge_search(SearchRequest(project=project, query=query, memory_store_ids=[store.pk],
                                                    document_paths=["/"], limit=10, channels=channels))
            answers[f"{'+'.join(channels)}:{query}"] = [[h.id, round(h.score, 9)] for h in result.results]
    print(json.dumps(answers))


if __name__ == "__main__":
    main(sys.argv[1])
