"""Push consumption's one implementation (`ConsumerService._deliver`, runs of messages) against the reference
model (`reference_consumer`, one event per message), byte for byte: on the real 5.3.1 consumer runs and on the
demo store with groups that retry through the delay levels and the DLQ, under put failures, a crash and a
watcher that crashes the broker in the middle of a run."""

import io
import json

import pytest
from reference_consumer import ReferenceConsumer

import mqtool.simulate.consumer as consumer_mod
from conftest import ORACLE, copy_with_wheel, need_oracle
from mqtool.formats.broker_conf import load_broker_conf
from mqtool.simulate.engine import BROKER
from mqtool.simulate.faults import clock_jump, crash
from mqtool.simulate.runner import simulate
from mqtool.simulate.scenario import load_scenario, parse_scenario
from mqtool.store.store import Store

S = 1_790_000_100_000  # after the demo store's last activity
TOPIC = "DemoTopicA"


def _watched(cls, nth: int, fault):
    """`cls` with a watcher that starts `fault(ctx)` (a crash, a clock jump) at its `nth` consumption."""

    class Watched(cls):
        def __init__(self, ctx, *args) -> None:
            super().__init__(ctx, *args)
            self.consumed = 0

        def _consume(self, key, d) -> None:
            self.consumed += 1
            if self.consumed == nth:  # as a watcher of the `consume` event would, before it is written
                self.ctx.engine.process(fault(self.ctx), BROKER, 0, "watcher-fault")
            super()._consume(key, d)

    return Watched


def _both(monkeypatch, open_store, config, start, until, scenario, version="5.3", watcher=None) -> str:
    logs = []
    for cls in (ReferenceConsumer, consumer_mod.ConsumerService):
        monkeypatch.setattr(consumer_mod, "ConsumerService", cls if watcher is None else _watched(cls, *watcher))
        sink = io.StringIO()
        r = simulate(open_store(), config, start, until, scenario, seed=5, broker_version=version, sink=sink)
        logs.append((sink.getvalue(), r.summary, r.violations))
        monkeypatch.undo()
    assert logs[1] == logs[0]
    return logs[0][0]


@pytest.mark.oracle
@pytest.mark.parametrize("pair", ["retry-dlq-5.3.1", "pop-revive-5.3.1"])
def test_real_consumer_runs(pair, tmp_path, monkeypatch):
    need_oracle()
    root = ORACLE / pair
    m = json.loads((root / "B.manifest.json").read_text())
    cfg = load_broker_conf(root / "broker.conf")
    start, stop = m["T_servicesStartedMs"], m["T_stopMs"]
    sc = load_scenario(root / "scenario.toml", start)
    copies = iter(range(2))
    log = _both(
        monkeypatch,
        lambda: Store.open(copy_with_wheel(root / "A", tmp_path / f"A{next(copies)}"), cfg),
        cfg,
        start,
        stop,
        sc,
    )
    assert '"event":"consume"' in log or '"event":"pop"' in log


GROUPS = [
    {"group": "GID_fail", "topic": TOPIC, "outcome": "fail", "max_reconsume_times": 2},
    {"group": "GID_two", "topic": TOPIC, "fail_times": 2, "consume_delay": "250ms"},
    {"group": "GID_poll", "topic": TOPIC, "fail_times": 1, "poll_interval": "300ms"},
]


@pytest.mark.parametrize("version", ["5.3", "4.9"])
@pytest.mark.parametrize(
    "faults",
    [
        [],
        [{"kind": "put_failure", "from": "+5s", "until": "+15s", "probability": 0.5}],
        [{"kind": "crash", "from": "+12s", "until": "+14s"}],
    ],
)
def test_groups_that_retry(version, faults, monkeypatch):
    cfg = load_broker_conf("fixtures/demo.broker.conf")
    sc = parse_scenario({"consumers": GROUPS, "faults": faults}, S)
    log = _both(monkeypatch, lambda: Store.open("fixtures/demo", cfg), cfg, S, S + 120_000, sc, version)
    assert log.count('"event":"consume"') > 60 and '"event":"dlq"' in log


def _at_start(log: str, event: str) -> list[str]:
    return [line for line in log.splitlines() if f'"time":{S},' in line and f'"event":"{event}"' in line]


def test_a_watcher_crash_cuts_the_run(monkeypatch):
    cfg = load_broker_conf("fixtures/demo.broker.conf")
    sc = parse_scenario({"consumers": GROUPS[:1]}, S)
    watcher = (4, lambda ctx: crash(ctx, ctx.engine.now + 5000))
    log = _both(monkeypatch, lambda: Store.open("fixtures/demo", cfg), cfg, S, S + 30_000, sc, watcher=watcher)
    assert len(_at_start(log, "consume")) == 4  # the 11 backlog messages are one run: the crash at the 4th stops it


def test_the_rest_of_a_cut_run_goes_before_the_next_run(monkeypatch):
    cfg = load_broker_conf("fixtures/demo.broker.conf")
    groups = [{**GROUPS[0], "group": "GID_a"}, {**GROUPS[0], "group": "GID_b"}]
    sc = parse_scenario({"consumers": groups}, S)
    watcher = (4, lambda ctx: clock_jump(ctx, 1000))
    log = _both(monkeypatch, lambda: Store.open("fixtures/demo", cfg), cfg, S, S + 30_000, sc, watcher=watcher)
    # the jump comes after GID_a's 4th consumption of its backlog; its other 7 go before any of GID_b's 11
    consumed = [json.loads(line) for line in _at_start(log, "consume")]
    assert [e["group"] for e in consumed] == ["GID_a"] * 11 + ["GID_b"] * 11
    assert len(_at_start(log, "clock_jump")) == 1
