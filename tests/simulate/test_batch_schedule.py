"""The delay levels' batch delivery of a due prefix of units (`ScheduleService._deliver_due`) writes the
same event log, byte for byte, and the same summary as the per-message walk (`reference_schedule`): on a
store where it delivers nearly everything, and where it must put a `SimMessage` or pass units over (no
REAL_TOPIC, a half-topic REAL_TOPIC, IPv6 hosts, non-ASCII values, records kept for `--out`, a put-failure
fault, a 4.9 broker); the batch reader answers what the light read answers."""

import io
import json

import pytest
from reference_schedule import ReferenceSchedule

import mqtool.simulate.runner as runner_mod
import mqtool.simulate.schedule as schedule_mod
from conftest import sibling
from mqtool.builder.broker import put_delay_message, to_properties_string
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.names import RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6
from mqtool.simulate.diskread import MappedBase
from mqtool.simulate.model import StoreModel
from mqtool.simulate.runner import simulate
from mqtool.simulate.scenario import parse_scenario
from mqtool.store import recordfiles
from mqtool.store.store import Store

batch_records = sibling(__file__, "test_batchread").batch_records

START = 1_800_000_000_000
_APPEND = StoreModel.append  # every re-put of a `SimMessage`, counted by `_run`


def _build(root, n=600, odd=True, version="5.3"):
    config = BrokerConfig.for_version(version)
    with StoreWriter(root, config, version) as w:
        for i in range(n):
            level = 1 + i % 3
            # the first half stored before the start (due at the first polls, long prefixes), the
            # rest 150 ms apart during the run (a unit or two per poll)
            ts = START - 30_000 + i if i < n // 2 else START + (i - n // 2) * 150
            props = [("UNIQ_KEY", f"D{i:05d}")]
            fields = {}
            if odd and i % 40 == 5:
                props.append(("KEYS", "ключ\u00e9"))
            if odd and i % 40 == 9:
                fields = {
                    "sys_flag": BORNHOST_V6 | STOREHOST_V6,
                    "born_host": "[::1]:7",
                    "store_host": "[fe80::1]:10911",
                }
            if odd and i % 40 in (13, 17):
                raw = to_properties_string(
                    [("UNIQ_KEY", f"D{i:05d}"), ("DELAY", str(level)), ("REAL_QID", "1")]
                    + ([("REAL_TOPIC", RMQ_SYS_TRANS_HALF_TOPIC)] if i % 40 == 17 else [])
                )
                w.append_message(RMQ_SYS_SCHEDULE_TOPIC, level - 1, b"odd", raw, store_timestamp=ts, born_timestamp=ts)
                continue
            put_delay_message(
                w,
                "BenchTopic",
                i % 4,
                b"d" * (i % 5),
                props,
                level=level,
                store_timestamp=ts,
                born_timestamp=ts,
                **fields,
            )
        w.write_checkpoint()
    return Store.open(root, config), config


def _run(store, config, batch, monkeypatch, scenario=None, version="5.3", hold=None, base=None, until=3_600_000):
    """The run's event log, its result and the CommitLog offsets of the records re-put as a `SimMessage`
    (through `StoreModel.append`; a row re-put is placed without one)."""
    monkeypatch.setattr(runner_mod, "ScheduleService", schedule_mod.ScheduleService if batch else ReferenceSchedule)
    per_message = []

    def counted(self, m, now, service=""):
        if service == "schedule":
            per_message.append(m.source_phys)
        return _APPEND(self, m, now, service)

    monkeypatch.setattr(StoreModel, "append", counted)
    sink = io.StringIO()
    res = simulate(
        store,
        config,
        START,
        START + until,
        scenario,
        seed=1,
        broker_version=version,
        sink=sink,
        hold_events=hold,
        base=base,
    )
    return sink.getvalue(), res, per_message


def _same(store, config, monkeypatch, bases=(None, None), **kw):
    log1, r1, slow1 = _run(store, config, False, monkeypatch, base=bases[0], **kw)
    log2, r2, slow2 = _run(store, config, True, monkeypatch, base=bases[1], **kw)
    assert log1.count("\n") > 0 and log2 == log1
    assert r2.summary == r1.summary and r2.violations == r1.violations
    return log1, len(slow1), len(slow2)


def test_batch_delivers_a_plain_store(tmp_path, monkeypatch):
    store, config = _build(tmp_path / "s", odd=False)
    log, slow_off, slow_on = _same(store, config, monkeypatch)
    assert log.count('"service":"schedule","event":"deliver"') == 600 == slow_off
    assert slow_on == 0  # every unit delivered by the batch


def test_batch_hands_odd_units_back(tmp_path, monkeypatch):
    store, config = _build(tmp_path / "s")
    log, slow_off, slow_on = _same(store, config, monkeypatch)
    # 15 units without REAL_TOPIC and 15 with the half topic are discarded, the rest delivered
    assert log.count('"service":"schedule","event":"deliver"') == 570 == slow_off
    # the discarded units are passed over by the batch; IPv6 hosts and non-ASCII values are sized by it
    assert slow_on == 0
    assert "ключé" not in log  # (the property is in the re-put's bytes, not in the event)


def test_batch_on_a_4_9_broker(tmp_path, monkeypatch):
    store, config = _build(tmp_path / "s", version="4.9")
    _same(store, config, monkeypatch, version="4.9")


def test_records_kept_for_out_go_per_message(tmp_path, monkeypatch):
    store, config = _build(tmp_path / "s", n=120)
    _log, slow_off, slow_on = _same(store, config, monkeypatch, hold=True)
    assert slow_on == slow_off == 114  # held events keep every re-put: nothing batch-wise


def test_batch_under_a_put_failure(tmp_path, monkeypatch):
    store, config = _build(tmp_path / "s", n=240)
    sc = parse_scenario(
        {
            "faults": [
                {
                    "kind": "put_failure",
                    "from": 0,
                    "until": 20_000,
                    "service": "schedule",
                    "status": "SERVICE_NOT_AVAILABLE",
                }
            ]
        },
        START,
    )
    log, _off, _on = _same(store, config, monkeypatch, scenario=sc)
    assert '"put_failed"' in log


def test_read_records_equals_the_light_read(tmp_path):
    store, _ = _build(tmp_path / "s", n=300)
    fast = MappedBase(store)
    n = 0
    for level in (1, 2, 3):
        units = [u for _o, u in fast.cq_units(RMQ_SYS_SCHEDULE_TOPIC, level - 1, 0, 1000)]
        got = batch_records(fast, [u[0] for u in units], [u[1] for u in units])
        for u, g in zip(units, got, strict=True):
            assert g is not None and g == fast.read(u[0], False, True)
            n += 1
    fast.close()
    assert n == 300


def test_batch_reads_records_one_by_one_past_the_span(tmp_path, monkeypatch):

    store, config = _build(tmp_path / "s", n=600, odd=False)
    monkeypatch.setattr(recordfiles, "MAX_SPAN", 64)  # the batch read answers nothing: each record on its own
    monkeypatch.setattr(schedule_mod, "BATCH_READ", 2)
    log, slow_off, slow_on = _same(store, config, monkeypatch)
    assert slow_off == 600 and slow_on == 0


def test_a_record_in_the_read_cache_is_read_as_a_message(tmp_path, monkeypatch):
    """A batch below the base's end and outside its read cache skips the look-up per record; a record
    someone read (in the cache) is taken from there (`message_once`), its re-put still a row."""
    store, config = _build(tmp_path / "s", odd=False)
    bases = MappedBase(store), MappedBase(store)
    primed = [base.message(base.cq_unit(RMQ_SYS_SCHEDULE_TOPIC, 0, 3)[0]).phys for base in bases]  # into the cache
    read = []
    once = MappedBase.message_once
    monkeypatch.setattr(MappedBase, "message_once", lambda self, phys: read.append(phys) or once(self, phys))
    log, slow_off, slow_on = _same(store, config, monkeypatch, bases=bases)
    assert slow_off == 600
    # the walk reads each unit once; the batch reads the cached record alone that way, and puts it as a row
    assert len(read) == 600 + 1 and read[600:] == primed[1:] and slow_on == 0


@pytest.mark.parametrize("version", ["5.3", "4.9"])
def test_a_real_qid_java_cannot_parse_ends_the_task(tmp_path, monkeypatch, version):
    """`messageTimeUp`'s `Integer.parseInt(REAL_QID)` throws for " 1" and "1_0" (Python's `int` takes both) and
    for an absent one: `executeOnTimeUp` catches it and ends the task as a failed put does, 5.3.1 at the next
    unit (the unit is skipped), 4.9.8 at the same one (the level is stuck there)."""
    config = BrokerConfig.for_version(version)
    qids = ["1", " 1", "2", "1_0", None, "3"]
    with StoreWriter(tmp_path / "s", config, version) as w:
        for i, qid in enumerate(qids):
            props = [("UNIQ_KEY", f"Q{i}"), ("DELAY", "1"), ("REAL_TOPIC", "BenchTopic")]
            raw = to_properties_string(props + ([("REAL_QID", qid)] if qid is not None else []))
            w.append_message(RMQ_SYS_SCHEDULE_TOPIC, 0, b"q", raw, store_timestamp=START - 9_000 + i, born_timestamp=0)
        w.write_checkpoint()
    log, _off, _on = _same(Store.open(tmp_path / "s", config), config, monkeypatch, version=version, until=20_000)
    delivered = [e["uniq_key"] for e in map(json.loads, log.splitlines()) if e["event"] == "deliver"]
    failed = [e for e in map(json.loads, log.splitlines()) if e["event"] == "put_failed"]
    assert {e["status"] for e in failed} == {"NumberFormatException"}
    if version == "5.3":
        assert delivered == ["Q0", "Q2", "Q5"] and [e["uniq_key"] for e in failed] == ["Q1", "Q3", "Q4"]
    else:
        assert delivered == ["Q0"] and {e["uniq_key"] for e in failed} == {"Q1"} and len(failed) > 100
