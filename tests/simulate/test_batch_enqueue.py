"""The timer's batch enqueue of the store's own units (`TimerEnqueue.base`, `batchread`)
writes the same event log, byte for byte, and the same summary as the per-message walk (`reference_timer`),
on a store where the batch takes every unit and on stores where it must hand units to the walk
(due at once, no or a bad TIMER_OUT_MS, cancels, IPv6 hosts, records across CommitLog files, a
torn store); the batch reader answers exactly what `MappedBase.props` answers, or None."""

import io

from reference_timer import use_reference

from conftest import sibling
from mqtool.builder.broker import put_message
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.names import TIMER_TOPIC
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6
from mqtool.simulate import batchread, timerenqueue
from mqtool.simulate.diskread import MappedBase
from mqtool.simulate.runner import simulate
from mqtool.simulate.scenario import parse_scenario
from mqtool.simulate.timerdequeue import TimerDequeue
from mqtool.store import recordfiles
from mqtool.store.store import Store

batch_records = sibling(__file__, "test_batchread").batch_records

START = 1_800_000_000_000
DAY = 86_400_000


def _timer(w, i, out, extra=(), **fields):
    props = [("UNIQ_KEY", f"T{i:05d}"), ("REAL_TOPIC", "BenchTopic"), ("REAL_QID", str(i % 4))]
    if out is not None:
        props.append(("TIMER_OUT_MS", out))
    put_message(
        w,
        TIMER_TOPIC,
        0,
        b"x" * (i % 7),
        props + list(extra),
        store_timestamp=START - 1000,
        born_timestamp=START - 1000,
        **fields,
    )


def _build(root, n=300, odd=True, file_size=1 << 20):
    config = BrokerConfig.for_version("5.3").with_overrides({"mappedFileSizeCommitLog": file_size})
    with StoreWriter(root, config) as w:
        for i in range(n):
            out = str(START + (i * 7_919_000) % (3 * DAY))  # spread over 3 days: some roll
            extra, fields = (), {}
            if odd:
                if i % 50 == 3:
                    out = str(START - 5000)  # due before the write time: put at once (per-message walk)
                elif i % 50 == 7:
                    out = None  # no TIMER_OUT_MS: passed over
                elif i % 50 == 11:
                    out = "soon"  # not a number: passed over
                elif i % 50 == 13:
                    extra = [("TIMER_DEL_UNIQKEY", f"BenchTopic+T{i - 6:05d}")]  # a cancel
                elif i % 50 == 17:
                    fields = {
                        "sys_flag": BORNHOST_V6 | STOREHOST_V6,
                        "born_host": "[::1]:7",
                        "store_host": "[fe80::1]:10911",
                    }
                elif i % 50 == 19:
                    extra = [("KEYS", "clé\u00e9 ünï")]
            _timer(w, i, out, extra, **fields)
        w.write_timercheck(START - 1000, 0, 0, 0)
        w.write_checkpoint()
    return Store.open(root, config), config


_DELIVER = TimerDequeue.deliver
LIGHT: list[int] = []  # the store's records the dequeue delivered without building them in the last `_run`


def _run(store, config, batch, monkeypatch, scenario=None, until=START + 3 * DAY, hold=None):
    use_reference(monkeypatch, not batch)
    LIGHT.clear()

    def deliver(self, write, due, phys, meta, hi, lo, slot_time):
        done = _DELIVER(self, write, due, phys, meta, hi, lo, slot_time)
        if done:
            _store_record(self, phys)
        return done

    monkeypatch.setattr(TimerDequeue, "deliver", deliver)
    sink = io.StringIO()
    res = simulate(store, config, START, until, scenario, seed=1, sink=sink, hold_events=hold)
    return sink.getvalue(), res


def _store_record(dequeue, phys: int) -> None:
    m = dequeue.st.ctx.model
    if phys not in m.messages and (m.spool is None or phys not in m.spool):
        LIGHT.append(phys)


def _same(store, config, monkeypatch, **kw):
    calls = []  # the records each batch read answered
    real = batchread.scan_plain

    def spy(*a):
        got = real(*a)
        calls.append(0 if got is None else int((got[1][:, 0] >= 0).sum()))
        return got

    monkeypatch.setattr(timerenqueue, "scan_plain", spy)
    per_msg, r1 = _run(store, config, False, monkeypatch, **kw)
    assert calls == []
    batched, r2 = _run(store, config, True, monkeypatch, **kw)
    assert per_msg.count("\n") > 0
    assert batched == per_msg
    assert r2.summary == r1.summary and r2.violations == r1.violations
    return per_msg, calls


def _store_enqueues(log: str) -> int:
    """Enqueues at the start: the store's own units (rolled records are enqueued again later)."""
    return log.count(f'{{"time":{START},"service":"timer","event":"enqueue"')


def test_batch_takes_every_unit_of_a_plain_store(tmp_path, monkeypatch):
    store, config = _build(tmp_path / "s", n=300, odd=False)
    log, calls = _same(store, config, monkeypatch)
    assert _store_enqueues(log) == 300
    assert sum(calls) == 300 and len(calls) == 1  # one batch read answered every record
    # the dequeue delivered the store's records without building them, but each queue's first
    # re-put (4 queues) and the rolled records (re-puts, read from the spool) went through `_put`
    timer_delivered = log.count('"service":"timer","event":"deliver"')
    rolled = log.count('"event":"roll"')
    assert rolled > 0 and len(LIGHT) == timer_delivered - rolled - 4


def test_kept_records_are_delivered_per_message(tmp_path, monkeypatch):
    store, config = _build(tmp_path / "s", n=200)
    log, _calls = _same(store, config, monkeypatch, hold=True)
    assert '"service":"timer","event":"deliver"' in log and LIGHT == []


def test_batch_hands_odd_units_to_the_per_message_walk(tmp_path, monkeypatch):
    store, config = _build(tmp_path / "s", n=300)
    log, calls = _same(store, config, monkeypatch)
    # 6 each of: due at once (direct deliveries), no TIMER_OUT_MS, a bad one (passed over)
    assert log.count('"direct":true') == 6
    assert _store_enqueues(log) == 300 - 18
    assert log.count('"cancel":true') >= 6  # (rolled cancel markers are enqueued again)
    assert calls == [300]  # one batch read answered every record, those put at once included


def test_batch_across_commitlog_files(tmp_path, monkeypatch):
    # 16 KiB files hold ~100 records each: a batch of records in several files is read per message
    store, config = _build(tmp_path / "s", n=400, file_size=16 << 10)
    assert len(store.commitlog.queue.files) > 2
    _same(store, config, monkeypatch)


def test_batch_small_span_limit_falls_back(tmp_path, monkeypatch):
    store, config = _build(tmp_path / "s", n=120, odd=False)
    monkeypatch.setattr(recordfiles, "MAX_SPAN", 64)  # every batch too wide: all read per message
    log, calls = _same(store, config, monkeypatch)
    assert calls and sum(calls) == 0
    assert _store_enqueues(log) == 120


def test_batch_with_a_fault_scenario(tmp_path, monkeypatch):
    store, config = _build(tmp_path / "s", n=200)
    sc = parse_scenario(
        {
            "faults": [
                {"kind": "put_failure", "from": 0, "until": 2000, "service": "timer", "status": "SERVICE_NOT_AVAILABLE"}
            ]
        },
        START,
    )
    log, _ = _same(store, config, monkeypatch, scenario=sc)
    assert '"put_failed"' in log


def _props_same(store: Store) -> int:
    fast = MappedBase(store, cache_messages=4)
    n = 0
    try:
        for topic, qid in store.queue_ids:
            lo, hi = fast.cq_min(topic, qid), fast.cq_max(topic, qid)
            units = [u for _o, u in fast.cq_units(topic, qid, lo, hi)]
            for shift in (0, 1, -1):
                phys = [u[0] + shift for u in units]
                got = [g and g[0] for g in batch_records(fast, phys, [u[1] for u in units])]
                for p, g in zip(phys, got, strict=True):
                    if g is not None:
                        assert g == fast.props(p), (topic, qid, p)
                        n += 1
    finally:
        fast.close()
    return n


def test_read_props_on_built_records(tmp_path):
    store, _ = _build(tmp_path / "s", n=120)
    assert _props_same(store) == 120  # every record whole in one file: all answered by the batch


def _corrupt(store: Store) -> list[int]:
    """Damage three timer records in place: PROPERTIESLENGTH past TOTALSIZE, a bad MAGICCODE, a
    negative BODYLENGTH; their positions are returned."""
    fast = MappedBase(store)
    units = [u for _o, u in fast.cq_units(TIMER_TOPIC, 0, 0, fast.cq_max(TIMER_TOPIC, 0))]
    hurt = []
    for k, (what, at) in enumerate([("props", 20), ("magic", 40), ("body", 60)]):
        phys, size, _tags = units[at]
        m = fast.message(phys)
        f = store.commitlog.queue.files[0]
        with open(f.path, "r+b") as fh:
            if what == "props":
                raw_len = len(m.props_raw.encode())
                fh.seek(phys - f.start + size - raw_len - 2)
                fh.write((raw_len + 50 + k).to_bytes(2, "big"))
            elif what == "magic":
                fh.seek(phys - f.start + 4)
                fh.write(b"\x00\x00\x00\x01")
            else:
                fh.seek(phys - f.start + 48 + 8 + 8 + 8 + 4 + 8)  # BODYLENGTH after IPv4 hosts
                fh.write((-3).to_bytes(4, "big", signed=True))
        hurt.append(phys)
    fast.close()
    return hurt


def test_damaged_records_are_left_to_the_per_message_read(tmp_path, monkeypatch):
    store, config = _build(tmp_path / "s", n=100, odd=False)
    hurt = _corrupt(store)
    store = Store.open(tmp_path / "s", config)
    fast = MappedBase(store, cache_messages=4)
    units = [u for _o, u in fast.cq_units(TIMER_TOPIC, 0, 0, 100)]
    got = batch_records(fast, [u[0] for u in units], [u[1] for u in units])
    assert [u[0] for u, g in zip(units, got, strict=True) if g is None] == hurt
    assert [fast.props(p) for p in hurt] == [None, None, None]
    fast.close()
    log, calls = _same(store, config, monkeypatch)
    assert _store_enqueues(log) == 97 and calls == [97]


def test_batch_and_light_deliveries_after_a_clock_jump(tmp_path, monkeypatch):
    # the broker's clock runs 90 s ahead of virtual time after the jump: TIMER_DEQUEUE_MS and the
    # re-put's size follow it
    store, config = _build(tmp_path / "s", n=300, odd=False)
    sc = parse_scenario({"faults": [{"kind": "clock_jump", "at": 1000, "delta": "+90s"}]}, START)
    log, _calls = _same(store, config, monkeypatch, scenario=sc)
    assert '"clock_jump"' in log and LIGHT
