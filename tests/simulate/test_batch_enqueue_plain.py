"""The timer's batch enqueue of the store's own units reads a plain properties string without a map
(`batchread.scan_plain`: one match gives TIMER_OUT_MS, TIMER_DEL_UNIQKEY's presence, REAL_TOPIC,
REAL_QID, UNIQ_KEY and the string's length, the re-put's size but TIMER_ENQUEUE_MS/TIMER_DEQUEUE_MS);
a string that is not plain (a duplicate key, an empty value) is parsed into a map as before. The
event log and the summary equal the per-message walk's (`reference_timer`), and the row a
plain string gives (`DeliveryRows.of_plain`) equals the one its map gives (`DeliveryRows.of_props`)."""

import io

import pytest
from reference_timer import use_reference

import mqtool.simulate.batchread as batchread
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.names import TIMER_TOPIC
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6
from mqtool.simulate import timerenqueue
from mqtool.simulate.diskread import MappedBase
from mqtool.simulate.model import StoreModel
from mqtool.simulate.runner import simulate
from mqtool.simulate.timerrows import DeliveryRows
from mqtool.store.store import Store

START = 1_800_000_000_000
DAY = 86_400_000
S, P = "\x02", "\x01"
FULLWIDTH = str.maketrans("0123456789", "０１２３４５６７８９")


def _shapes(i: int) -> list[tuple[str, bool]]:
    """(raw properties string, plain?) of timer record `i`, due `out` (spread over 3 days: some roll)."""
    out = str(START + 60_000 + (i * 7_919_000) % (3 * DAY))
    o = f"TIMER_OUT_MS{P}{out}"
    u = f"UNIQ_KEY{P}T{i:05d}"
    t = f"REAL_TOPIC{P}BenchTopic"
    q = f"REAL_QID{P}{i % 4}"
    enq = f"TIMER_ENQUEUE_MS{P}{START - 5000 - i}"
    deq = f"TIMER_DEQUEUE_MS{P}{START - 3000}"
    return [
        (S.join([u, t, q, o]) + S, True),  # the broker's string (5.x: a trailing separator)
        (S.join([o, t, q, u]), True),  # another order, none (as 4.9.8 writes a string)
        (S.join([t, q, o, u, f"KEYS{P}ключ é"]) + S, True),  # a non-ASCII value
        (S.join([u, t, q, enq, o]) + S, True),  # TIMER_ENQUEUE_MS already present (a rolled record's)
        (S.join([enq, u, t, q, o, deq, f"TIMER_ROLL_TIMES{P}1"]), True),  # both dequeue properties
        (S.join([t, q, o]) + S, True),  # no UNIQ_KEY
        (S.join([o, f"UNIQ_KEY{P}7F000001000018B4AAC2{i:012X}", f"A.B*(x{P}v", t, q]) + S, True),
        (S.join([u, t, q, f"TIMER_DEL_UNIQKEY{P}BenchTopic+T{i - 9:05d}", o]) + S, True),  # a cancel
        (S.join([u, t, o]) + S, True),  # no REAL_QID
        (S.join([u, t, q, f"TIMER_OUT_MS{P}{out.translate(FULLWIDTH)}"]) + S, True),  # digits `int` takes as text
        (S.join([u, t, q, f"TIMER_OUT_MS{P}{out}x"]) + S, True),  # not a number: passed over
        (S.join([u, t, q, o, f"REAL_QID{P}{(i + 1) % 4}"]) + S, False),  # a duplicate key: the last wins
        (S.join([u, t, q, o, u]) + S, False),  # a duplicate key of the same value: the map is shorter
        (S.join([u, t, f"KEYS{P}", q, o]) + S, False),  # an empty value
        (S.join([u, t, q, o, f"REAL_TOPIC{P}Other"]), False),  # a duplicate REAL_TOPIC, no trailing separator
    ]


N_SHAPES = len(_shapes(0))


def _build(root, n: int = N_SHAPES * 20):
    config = BrokerConfig.for_version("5.3")
    with StoreWriter(root, config) as w:
        for i in range(n):
            raw, _plain = _shapes(i)[i % N_SHAPES]
            fields = {}
            if i % 7 == 3:
                fields = {
                    "sys_flag": BORNHOST_V6 | STOREHOST_V6,
                    "born_host": "[::1]:7",
                    "store_host": "[fe80::1]:10911",
                }
            elif i % 7 == 5:
                fields = {"sys_flag": BORNHOST_V6, "born_host": "[::1]:7"}
            w.append_message(
                TIMER_TOPIC, 0, b"x" * (i % 9), raw, store_timestamp=START - 1000, born_timestamp=START - 1000, **fields
            )
        w.write_timercheck(START - 1000, 0, 0, 0)
        w.write_checkpoint()
    return Store.open(root, config), config


def _run(store, config, batch: bool, monkeypatch) -> tuple[str, object, list]:
    use_reference(monkeypatch, not batch)
    answers: list[int] = []  # each record's status in the scan: 1 matched (plain), 0 parsed into a map, -1 not read
    real = batchread.scan_plain

    def spy(*a):
        got = real(*a)
        if got is not None:
            answers.extend(got[1][:, 0].tolist())
        return got

    monkeypatch.setattr(timerenqueue, "scan_plain", spy)
    sink = io.StringIO()
    res = simulate(store, config, START, START + 3 * DAY, None, seed=1, sink=sink)
    return sink.getvalue(), res, answers


@pytest.mark.parametrize("batch_size", [4096, 7])
def test_batch_equals_the_per_message_walk(tmp_path, monkeypatch, batch_size):
    monkeypatch.setattr(timerenqueue, "ENQUEUE_BATCH", batch_size)
    store, config = _build(tmp_path / "s")
    log1, r1, none = _run(store, config, False, monkeypatch)
    log2, r2, answers = _run(store, config, True, monkeypatch)
    assert none == []
    assert log2 == log1
    assert r2.summary == r1.summary and r2.violations == r1.violations
    n = N_SHAPES * 20
    plain, mapped = answers.count(1), answers.count(0)
    # every record answered by the batch read, once: 11 plain shapes of 9 key sequences (the first
    # string of each parsed into a map to make its template, the rest matched) and 4 that are not plain
    assert plain + mapped == n
    assert plain == 11 * 20 - 9 and mapped == 4 * 20 + 9
    # 20 not a number (passed over); the rest enqueued at the start
    assert log1.count(f'{{"time":{START},"service":"timer","event":"enqueue"') == n - 20
    assert log1.count('"cancel":true') >= 20
    assert '"uniq_key":"T00002"' in log1 and '"uniq_key":"7F000001000018B4AAC2000000000006"' in log1
    # delivered: all but the 20 not a number and the 20 cancel markers (each names record i - 9, due in
    # another slot: nothing is cancelled)
    assert '"event":"roll"' in log1 and log1.count('"service":"timer","event":"deliver"') == n - 20 - 20


def test_plain_rows_equal_the_rows_of_the_maps(tmp_path):
    """`of_plain` of what `read_plain` gives a plain string equals `of_props` of the light read's map."""
    store, _config = _build(tmp_path / "s")
    fast = MappedBase(store)
    model = StoreModel(fast)
    t = DeliveryRows(lambda: model.capacity)
    seen = 0
    try:
        units = [u for _o, u in fast.cq_units(TIMER_TOPIC, 0, 0, N_SHAPES * 20)]
        for _ in range(2):  # the first string of each sequence makes its template, the second pass matches it
            got = batchread.read_plain(fast, [u[0] for u in units], [u[1] for u in units], timerenqueue.ENQ_WANTED)
        for (phys, _size, _tags), g in zip(units, got, strict=True):
            props, body_len, sys_flag = fast.read(phys, False, True)
            if len(g) == 3:
                assert g == (props, body_len, sys_flag)
                continue
            seen += 1
            n, values = g
            assert values == tuple(None if props.get(w) is None else props[w].encode() for w in timerenqueue.ENQ_WANTED)
            for k, seg in ((5, timerenqueue.ENQ_SEG), (6, timerenqueue.DEQ_SEG)):
                if values[k] is not None:
                    n -= len(values[k]) + seg
            if "TIMER_DEL_UNIQKEY" in props:
                assert t.of_props(props, body_len, sys_flag) == (0, 0, 0)  # a cancel marker: no row either way
                continue
            want = t.of_props(props, body_len, sys_flag)
            assert t.of_plain([n], [props.get("REAL_TOPIC")], [props.get("REAL_QID")], [props.get("UNIQ_KEY")]) == [
                want
            ]
            assert want != (0, 0, 0)
    finally:
        fast.close()
    assert seen == 11 * 20
