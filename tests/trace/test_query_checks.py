"""`trace`'s option checks live in the library (`TraceQuery`, `future.simulator_plan`); the CLI only
prints their message (exit 2, tests/trace/test_cli_and_index.py)."""

from pathlib import Path

import pytest

from mqtool.formats.broker_conf import load_broker_conf
from mqtool.simulate.scenario import ScenarioError
from mqtool.store.store import Store
from mqtool.trace import TraceError, TraceQuery
from mqtool.trace.future import simulator_plan

A = 1_790_000_020_100  # the demo store's last activity (tests/trace/test_future_consumers.py)


@pytest.mark.parametrize(("kwargs", "message"), [
    ({}, "give exactly one of --uniq-key, --key, --offset, --msg-id"),
    ({"key": "a", "offset": 1}, "give exactly one of --uniq-key, --key, --offset, --msg-id (got --key, --offset)"),
    ({"uniq_key": "u", "msg_id": "m", "key": "k"},
     "give exactly one of --uniq-key, --key, --offset, --msg-id (got --uniq-key, --key, --msg-id)"),
])
def test_a_message_is_named_exactly_once(kwargs, message):
    with pytest.raises(TraceError) as e:
        TraceQuery(**kwargs)
    assert str(e.value) == message


def test_no_until_no_simulator():
    assert simulator_plan(None, None, None) == (None, None)  # the store is not even looked at
    with pytest.raises(TraceError, match=r"^--scenario is for the simulator: add --until T$"):
        simulator_plan(None, None, Path("consumers.toml"))


def test_until_counts_from_the_store_and_a_scenario_must_exist(tmp_path):
    store = Store.open("fixtures/demo", load_broker_conf("fixtures/demo.broker.conf"))
    until_ms, scenario = simulator_plan(store, "+2h", None)
    assert until_ms == A + 2 * 3_600_000 and scenario is not None and scenario.consumers == []
    with pytest.raises(ScenarioError) as e:
        simulator_plan(store, "+2h", tmp_path / "none.toml")
    assert str(e.value) == f"{tmp_path / 'none.toml'}: no such scenario file"
