"""The ``citus`` group: a real Citus cluster (a coordinator and two workers on loopback, built once
from ../shared/citus, tests/citus/cluster.py) for the whole session, stopped at its end, also
when a test fails or the run is interrupted.

Without the Citus source the group skips with the named reason of tests/skips.py (``citus``);
under ``CI=true``, where ../shared is beside the clone, a missing source fails it instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..skips import require
from .cluster import SOURCE_ENV, CitusCluster, citus_source, running_cluster, source_path

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Every test under tests/citus is in the group (``pytest -m citus``)."""
    for item in items:
        if item.path.is_relative_to(HERE):
            item.add_marker(pytest.mark.citus)


@pytest.fixture(scope="session")
def citus_cluster() -> Iterator[CitusCluster]:
    """The running cluster; its ``postgres`` database has citus and vector (and pg_textsearch) on
    every node and both workers registered. Tests that need a database of their own call
    ``citus_cluster.create_database(name)``."""
    source = citus_source()
    require("citus", "" if source is not None else
            f"no Citus source tarball at {source_path()} (set {SOURCE_ENV} to one)")
    assert source is not None
    with running_cluster(source) as cluster:
        yield cluster
