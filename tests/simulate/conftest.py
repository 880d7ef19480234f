"""Stores for the simulator tests: `built` (a small in-memory store for hand-computed cases), each oracle
store opened with its broker version's defaults, and a store torn by a crash."""

import pytest

from mqtool.builder.crash import build_crash, crash_config
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.store.store import Store
from simkit import Built


@pytest.fixture
def built() -> Built:
    return Built()


@pytest.fixture
def oracle_sim_store(oracle_store) -> tuple[str, Store]:
    """(name, store) of each oracle store, opened with the defaults of the broker version that wrote it."""
    name, root, _ = oracle_store
    return name, Store.open(root, BrokerConfig.for_version("4.9" if "4.9" in name else "5.3"))


@pytest.fixture
def torn_store(tmp_path) -> Store:
    """The store `builder/crash.py` tears (a broker killed mid-write), opened with its config."""
    root = tmp_path / "crash"
    build_crash(root)
    return Store.open(root, crash_config())
