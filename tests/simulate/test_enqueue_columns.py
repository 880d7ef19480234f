"""The timer's batch enqueue of a large batch reads it as columns (`batchread.scan_plain`, the compiled
`propscan` kernel) instead of `read_plain`'s tuples: the event log and the summary equal the per-message
walk's on the stores of the `read_plain` tests (odd properties strings, units put at once, cancels, IPv6
hosts, several CommitLog files, a fault), with the kernel as native code and as plain Python; and each
record's answer taken from the columns equals `read_plain`'s."""

import io

import numpy as np
import pytest
from reference_timer import use_reference

from conftest import sibling
from mqtool.formats.names import TIMER_TOPIC
from mqtool.simulate import batchread, timerenqueue
from mqtool.simulate.diskread import MappedBase
from mqtool.simulate.runner import simulate
from mqtool.simulate.scenario import parse_scenario
from mqtool.simulate.timerroll import TimerRolls
from mqtool.simulate.timerrows import DeliveryRows
from mqtool.store import propscan

plain_store = sibling(__file__, "test_batch_enqueue")
shapes = sibling(__file__, "test_batch_enqueue_plain")
START = shapes.START
DAY = shapes.DAY


@pytest.fixture(params=["native", "python"])
def engine(request, monkeypatch):
    if request.param == "python":
        monkeypatch.setattr(propscan, "KERNEL", propscan.scan_py)  # the fallback without the extension
    return request.param


def _run(store, config, monkeypatch, batch: bool, scenario=None, hold=False):
    use_reference(monkeypatch, not batch)
    scanned: list[int] = []
    real = batchread.scan_plain

    def spy(*a):
        got = real(*a)
        scanned.append(0 if got is None else int((got[1][:, 0] >= 0).sum()))
        return got

    monkeypatch.setattr(timerenqueue, "scan_plain", spy)
    sink = io.StringIO()
    res = simulate(store, config, START, START + 3 * DAY, scenario, seed=1, sink=sink, hold_events=hold)
    return sink.getvalue(), res, scanned


def _same(store, config, monkeypatch, batch_size=4096, **kw):
    monkeypatch.setattr(timerenqueue, "ENQUEUE_BATCH", batch_size)
    log1, r1, none = _run(store, config, monkeypatch, False, **kw)
    log2, r2, scanned = _run(store, config, monkeypatch, True, **kw)
    assert none == []
    assert log1.count('"event":"enqueue"') > 0
    assert log2 == log1
    assert r2.summary == r1.summary and r2.violations == r1.violations
    return log1, scanned


@pytest.mark.parametrize("batch_size", [4096, 7])
def test_columns_on_odd_strings(tmp_path, monkeypatch, engine, batch_size):
    store, config = shapes._build(tmp_path / "s")
    log, scanned = _same(store, config, monkeypatch, batch_size)
    n = shapes.N_SHAPES * 20
    assert sum(scanned) == n  # every record's header checked by the kernel, once
    assert len(scanned) == -(-n // batch_size)  # n = 300 records in batches of batch_size: 1 (4096) or 43 (7)
    assert log.count(f'{{"time":{START},"service":"timer","event":"enqueue"') == n - 20  # 20 not a number


def test_columns_hand_odd_units_to_the_per_message_walk(tmp_path, monkeypatch, engine):
    store, config = plain_store._build(tmp_path / "s", n=300)
    log, scanned = _same(store, config, monkeypatch)
    # 6 each of: due at once (direct deliveries), no TIMER_OUT_MS, a bad one (passed over); the run is
    # taken up to each unit put at once and goes on after it
    assert log.count('"direct":true') == 6
    assert plain_store._store_enqueues(log) == 300 - 18
    assert scanned == [300]  # one read of the 300 records, those put at once included


def test_columns_across_commitlog_files_and_held_events(tmp_path, monkeypatch, engine):
    store, config = plain_store._build(tmp_path / "s", n=400, file_size=16 << 10)
    _log, scanned = _same(store, config, monkeypatch, hold=True)
    # 400 records over 16 KiB CommitLog files: the batch cannot be read batch-wise (scan_plain answers None),
    # every record is read per message
    assert scanned == [0]


def test_columns_with_a_fault_scenario(tmp_path, monkeypatch, engine):
    store, config = plain_store._build(tmp_path / "s", n=200)
    sc = parse_scenario(
        {
            "faults": [
                {"kind": "put_failure", "from": 0, "until": 2000, "service": "timer", "status": "SERVICE_NOT_AVAILABLE"}
            ]
        },
        START,
    )
    _log, scanned = _same(store, config, monkeypatch, scenario=sc)
    # 200 records; the first unit put at once waits (the fault): the walk reads the 196 after it again once
    # the put is done, and the other units put at once are put at the first try
    assert scanned == [200, 196]


def _answers(fast, units):
    got = batchread.scan_plain(fast, [u[0] for u in units], [u[1] for u in units], timerenqueue.ENQ_WANTED)
    buf, out, answers = got
    try:
        nw = len(timerenqueue.ENQ_WANTED)
        return [
            propscan.answer(out, k, buf, nw) if out[k, 0] == 1 else answers.get(k) if out[k, 0] == 0 else None
            for k in range(len(units))
        ], out.copy()
    finally:
        batchread.close(buf)


def test_scan_plain_answers_what_read_plain_answers(tmp_path, engine):
    store, _config = shapes._build(tmp_path / "s")
    fast = MappedBase(store)
    try:
        units = [u for _o, u in fast.cq_units(TIMER_TOPIC, 0, 0, shapes.N_SHAPES * 20)]
        got, _out = _answers(fast, units)
        fast.templates.clear()  # learnt anew
        want = batchread.read_plain(fast, [u[0] for u in units], [u[1] for u in units], timerenqueue.ENQ_WANTED)
        assert got == want
        # the second pass: every plain string matched (11 plain shapes), the 4 others parsed
        got2, out2 = _answers(fast, units)
        assert got2 == batchread.read_plain(fast, [u[0] for u in units], [u[1] for u in units], timerenqueue.ENQ_WANTED)
        assert (out2[:, 0] == 1).sum() == 11 * 20 and (out2[:, 0] == 0).sum() == 4 * 20
        matched = np.flatnonzero(out2[:, 0] == 1)
        for k in matched.tolist():
            out_b = got2[k][1][0]
            assert out2[k, propscan.NUMBER] == (int(out_b) if out_b.isdigit() and out_b.isascii() else -1)
    finally:
        fast.close()


@pytest.mark.parametrize("odd", [None, "ключ00AB"])  # with a non-ASCII key
def test_plain_rows_by_kind_of_uniq_key(odd):
    """`DeliveryRows.of_plain` packs a UNIQ_KEY of 32 uppercase hex digits (kind 1), a prefix and up to 16 such
    digits (kind 2) or none (kind 0), and gives no row where it cannot; `uniq_key` reads each back."""
    uks = [
        "T00000000",
        "T0000000A",
        "7F000001000018B4AAC2000000000006",
        "7f000001000018b4aac2000000000006",
        None,
        "A.B*(x",
        "%d-00FF",
        "X" * 20 + "0123456789ABCDEF0123",
        "T00000001",
        "00FF",
        "0123456789ABCDEF0",
        "T00000002",
        "7F000001000018B4AAC200000000000G",
        "P" * 16 + "0A",
        "P" * 17 + "0A",
        odd,
        "T00000003",
    ]
    n = len(uks)
    reals = ["BenchTopic"] * (n - 2) + [None, "Other"]
    qids = [str(i % 4) for i in range(n)]
    qids[6] = "x"
    sizes = [100 + i for i in range(n)]
    sizes[5] = 1 << 29  # past the row's range
    delete = [i == 9 for i in range(n)]
    roll = [i == 10 for i in range(n)]
    a = DeliveryRows(lambda: 16)
    kept = [i for i in range(n) if not (delete[i] or roll[i])]
    packed = dict(zip(kept, a.of_plain(*([col[i] for i in kept] for col in (sizes, reals, qids, uks))), strict=True))
    got = [packed.get(i, (0, 0, 0)) for i in range(n)]
    one = DeliveryRows(lambda: 16)  # the same rows one call a row (n = 1)
    assert [one.of_plain([sizes[i]], [reals[i]], [qids[i]], [uks[i]])[0] for i in kept] == [packed[i] for i in kept]
    assert [a.uniq_key(r) for r in got if r[0]] == [uks[i] for i, r in enumerate(got) if r[0]]
    # kind 2 (prefix and digits), 1 (32 hex digits), 0 (none); no row: the size past range (5), the cancel (9),
    # the roll (10), no hex digit at the end (12), no REAL_TOPIC (15); a lowercase key's tail "2000000000006"
    kinds = [None if r == (0, 0, 0) else r[0] >> 32 & 3 for r in got]
    assert kinds == [2, 2, 1, 2, 0, None, 2, 2, 2, None, None, 2, None, 2, 2, None, 2]
    assert a.uniq_key(got[3]) == uks[3] and got[3][2] == 0x2000000000006
    assert got[1][1:] == (a.formats.index("T%08X"), 10) and a.formats[got[7][1]] == "X" * 20 + "0123%016X"


def test_roll_rows_from_the_dequeue_take_the_batch_path(tmp_path, monkeypatch):
    """A roll re-put the dequeue keeps as a row reaches `TimerEnqueue.take` by its values
    (`TimerRolls.enqueue_values`: a stand-in here that answers them from the re-put's properties): the same log."""
    from mqtool.formats.names import (
        PROPERTY_REAL_QUEUE_ID,
        PROPERTY_REAL_TOPIC,
        PROPERTY_TIMER_DEL_UNIQKEY,
        PROPERTY_TIMER_OUT_MS,
        PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    )

    answered = []

    def roll_enqueue(self, phys):
        props, body_len, sys_flag = self.st.props_rec(phys)
        if body_len is None or PROPERTY_TIMER_DEL_UNIQKEY in props:
            return None  # not a re-put made in the run (or a cancel marker): the walk reads it
        meta, _hi, _lo = x = self.st.rows.of_props(props, body_len, sys_flag)
        if x == (0, 0, 0) or not props[PROPERTY_TIMER_OUT_MS].isdigit():
            return None
        answered.append(phys)
        return (
            int(props[PROPERTY_TIMER_OUT_MS]),
            False,
            props.get(PROPERTY_REAL_TOPIC),
            props.get(PROPERTY_REAL_QUEUE_ID),
            props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX),
            meta >> 34,
        )

    store, config = plain_store._build(tmp_path / "s", n=300)
    log1, r1, _ = _run(store, config, monkeypatch, False)
    monkeypatch.setattr(TimerRolls, "enqueue_values", roll_enqueue)
    log2, r2, _ = _run(store, config, monkeypatch, True)
    assert log2 == log1 and r2.summary == r1.summary
    # every roll re-put reached the batch by its row but the rolled cancel markers' (read as before)
    rolled_cancels = sum(
        1 for line in log1.splitlines() if f'"time":{START},' in line and '"roll":true,"cancel":true' in line
    )
    assert log1.count('"event":"roll"') == 90 and rolled_cancels == 2 and len(answered) == 88
