"""The timer's steps (`TimerEnqueue.take` over runs of units, `TimerDequeue.slot`'s row deliveries and rolls
kept as rows) against its reference model, the per-message walk (`reference_timer`): the same event log,
byte for byte, and the same summary, on the stores RocketMQ wrote (basic-5.3.1, pair_default's A), on the
fixture stores (demo, crash) and on a generated store under each kind of fault."""

import io

import pytest
from reference_timer import use_reference

from conftest import FIXTURES, ORACLE, copy_with_wheel, need_oracle, sibling
from mqtool.formats.broker_conf import BrokerConfig, load_broker_conf
from mqtool.simulate.runner import default_start, simulate
from mqtool.simulate.scenario import parse_scenario
from mqtool.store.store import Store

DAY = 86_400_000
generated = sibling(__file__, "test_batch_timer")


def _both(store: Store, config: BrokerConfig, monkeypatch, start: int | None = None, days: int = 3, faults=()):
    """(the library's event log, the reference's), after checking the two runs' summaries are equal."""
    start = default_start(store) if start is None else start
    scenario = parse_scenario({"faults": list(faults)}, start) if faults else None
    logs, summaries = [], []
    for reference in (True, False):
        use_reference(monkeypatch, reference)
        sink = io.StringIO()
        res = simulate(store, config, start, start + days * DAY, scenario, seed=1, sink=sink)
        logs.append(sink.getvalue())
        summaries.append((res.summary, res.violations))
    assert summaries[0] == summaries[1]
    return logs[1], logs[0]


def _timer_events(log: str) -> int:
    return log.count('"service":"timer"')


@pytest.mark.oracle
def test_basic_5_3_1(basic_store, monkeypatch):
    config = BrokerConfig().with_overrides(
        {"mappedFileSizeCommitLog": 65536, "mappedFileSizeConsumeQueue": 1280, "mappedFileSizeTimerLog": 65536}
    )
    library, reference = _both(Store.open(basic_store, config), config, monkeypatch, days=4)
    assert library == reference and '"event":"cancel"' in reference and _timer_events(reference) > 0


@pytest.mark.oracle
def test_pair_default_a(tmp_path, monkeypatch):
    need_oracle()
    store = copy_with_wheel(ORACLE / "pair_default/A", tmp_path / "A")
    config = load_broker_conf(ORACLE / "pair_default/broker.conf")
    library, reference = _both(Store.open(store, config), config, monkeypatch)
    assert library == reference and _timer_events(reference) > 0


@pytest.mark.parametrize("name", ["demo", "crash"])
def test_fixture_stores(name, monkeypatch):
    config = load_broker_conf(FIXTURES / f"{name}.broker.conf")
    library, reference = _both(Store.open(FIXTURES / name, config), config, monkeypatch)
    assert library == reference and _timer_events(reference) > 0


FAULTS = {
    "put_failure": [
        {"kind": "put_failure", "from": 0, "until": 3_600_000, "service": "timer", "status": "SERVICE_NOT_AVAILABLE"}
    ],
    "put_failure_given_up": [
        {"kind": "put_failure", "from": 0, "until": 600_000, "service": "timer", "status": "UNKNOWN_ERROR"}
    ],
    "clock_jump": [{"kind": "clock_jump", "at": 60_000, "delta": "+2h"}],
    "crash": [{"kind": "crash", "from": 3_600_000, "until": 7_200_000}],
}


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_generated_store_with_faults(tmp_path, monkeypatch, fault):
    store, config = generated._build(tmp_path / "s")
    library, reference = _both(store, config, monkeypatch, start=generated.START, faults=FAULTS[fault])
    assert library == reference
    assert '"event":"cancel"' in reference and '"event":"roll"' in reference
    if fault.startswith("put_failure"):
        assert '"put_failed"' in reference
