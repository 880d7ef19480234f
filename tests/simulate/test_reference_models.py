"""The services' one implementation (`ScheduleService._deliver_due`, `TransactionService._check_batch`) against
the reference models, the per-message walks (`reference_schedule`, `reference_transaction`), byte for byte: on
every shared store, on the store a crash tore, and on generated stores of delayed and half messages under put
failures, a crash and a clock jump, async delivery, producer answers and a consumer that retries through the
delay levels (kept and watched re-puts)."""

import io
import random

import pytest
from reference_schedule import ReferenceSchedule
from reference_transaction import ReferenceTransaction

import mqtool.simulate.runner as runner_mod
from mqtool.builder.broker import put_delay_message, put_half_message, put_op_message
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.simulate.runner import default_start, simulate
from mqtool.simulate.scenario import parse_scenario
from mqtool.simulate.schedule import ScheduleService
from mqtool.simulate.transaction import TransactionService
from mqtool.store.store import Store

START = 1_800_000_000_000
HOUR = 3_600_000


def _both(monkeypatch, store, config, start, until, scenario=None, version="5.3", **kw) -> str:
    logs = []
    for schedule, transaction in ((ReferenceSchedule, ReferenceTransaction), (ScheduleService, TransactionService)):
        monkeypatch.setattr(runner_mod, "ScheduleService", schedule)
        monkeypatch.setattr(runner_mod, "TransactionService", transaction)
        sink = io.StringIO()
        sc = parse_scenario(scenario, start) if scenario is not None else None
        r = simulate(store, config, start, until, sc, seed=3, broker_version=version, sink=sink, **kw)
        logs.append((sink.getvalue(), r.summary, r.violations))
    same = logs[1] == logs[0]  # not `assert logs[1] == logs[0]`: pytest's diff of two long logs takes minutes
    assert same
    return logs[0][0]


def test_shared_stores(oracle_sim_store, monkeypatch):
    name, store = oracle_sim_store
    start = default_start(store)
    _both(monkeypatch, store, store.config, start, start + 2 * 86_400_000, version="4.9" if "4.9" in name else "5.3")


def test_the_torn_store(torn_store, monkeypatch):
    start = default_start(torn_store)
    _both(monkeypatch, torn_store, torn_store.config, start, start + HOUR)


def _generated(root, seed: int, version: str = "5.3") -> tuple[Store, BrokerConfig]:
    rng = random.Random(seed)
    config = BrokerConfig.for_version(version)
    with StoreWriter(root, config, version) as w:
        for i in range(400):
            level = rng.randint(1, 6)
            ts = START - rng.randint(0, 600_000) if i < 200 else START + rng.randint(0, HOUR)
            props = [("UNIQ_KEY", f"G{i:05d}")]
            if rng.random() < 0.05:
                props.append(("KEYS", "ключ"))
            put_delay_message(w, f"T{rng.randint(0, 2)}", rng.randint(0, 3), b"g" * rng.randint(0, 9), props,
                              level=level, store_timestamp=ts, born_timestamp=ts)
        done = []
        for i in range(200):
            born = START - rng.randint(0, 200_000)
            props = [("UNIQ_KEY", f"H{i:05d}"), ("KEYS", f"order-{i}")]
            if rng.random() < 0.1:
                props.append(("CHECK_IMMUNITY_TIME_IN_SECONDS", str(rng.choice([30, 200]))))
            if rng.random() < 0.05:
                props.append(("TRANSACTION_CHECK_TIMES", rng.choice(["x", "2", "14"])))
            stored = born
            if rng.random() < 0.1:  # a producer's clock ahead: immune, and `isNeedCheck` once its put-back fails
                born = START + rng.randint(HOUR, 5 * HOUR)
                props.append(("CHECK_IMMUNITY_TIME_IN_SECONDS", "60"))
            h = put_half_message(w, "TxTopic", i % 3, b"h" * (i % 4), props, store_timestamp=stored,
                                 born_timestamp=born,
                                 producer_group="PG")
            if rng.random() < 0.1:
                done.append(h.queue_offset)
        for ops in [done] if w.v5 else [[d] for d in done]:
            put_op_message(w, ops, store_timestamp=START - 50_000)
        w.write_checkpoint()
    return Store.open(root, config), config


FAULTS = {
    "put_failures": {"faults": [{"kind": "put_failure", "from": 0, "until": 30_000, "service": "schedule"},
                                {"kind": "put_failure", "from": 600_000, "until": 601_000},
                                {"kind": "put_failure", "from": 60_000, "until": 400_000, "service": "transaction",
                                 "probability": 0.3}]},
    "answers": {"broker": {"transactionCheckMax": 4},
                "transaction": {"answers": [{"key": "order-1*", "answer": "commit", "probability": 0.5},
                                            {"producer_group": "PG", "answer": "rollback", "probability": 0.2}],
                                "answer_delay_ms": 300}},
    "crash": {"faults": [{"kind": "crash", "from": 20_000, "until": 25_000},
                         {"kind": "clock_jump", "at": 900_000, "delta": -30_000}]},
    "async": {"broker": {"enableScheduleAsyncDeliver": "true"},
              "faults": [{"kind": "put_failure", "from": 0, "until": 5_000, "service": "schedule"}]},
    "retries": {"consumers": [{"group": "G", "topic": "T1", "mode": "push", "outcome": "fail",
                               "max_reconsume_times": 3}]},
}


@pytest.mark.parametrize("version", ["5.3", "4.9"])
@pytest.mark.parametrize("kind", sorted(FAULTS))
def test_generated_stores_with_faults(tmp_path, monkeypatch, kind, version):
    store, config = _generated(tmp_path / "s", 7, version)
    log = _both(monkeypatch, store, config, START, START + 2 * HOUR, FAULTS[kind], version)
    assert '"service":"schedule","event":"deliver"' in log and '"service":"transaction","event":"check"' in log
    if kind == "put_failures":
        assert '"transaction","event":"put_failed"' in log and '"schedule","event":"put_failed"' in log
    if kind == "answers":
        assert '"event":"commit"' in log and '"event":"rollback"' in log


def test_in_memory_store(built, monkeypatch):
    for i in range(40):
        built.delay(1 + i % 3, START - 5_000 + i * 300, 1000 * (1 + i % 3), topic=f"T{i % 2}", qid=i % 4)
    log = _both(monkeypatch, None, BrokerConfig.for_version("5.3"), START, START + HOUR, base=built.base,
                timer_state=built.timer_state)
    assert log.count('"event":"deliver"') == 40
