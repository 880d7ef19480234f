"""A timer roll kept as a row (`TimerRolls.keep`): in a run that spools the timer topic's re-puts, a ROLL unit's
record is re-put without building it (a roll slot's records read batch-wise, `batchread.read_plain`), yet the event
log is the per-message walk's (`reference_timer`), byte for byte, and the record a row stands for
(`RecordSpool.get` -> `TimerRolls.rebuild`) equals, field for field, the one `StoreModel.append` put in the spool
before."""

import io

import pytest
from reference_timer import use_reference

from mqtool.builder.broker import put_message
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.names import TIMER_TOPIC
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6
from mqtool.simulate import timerdequeue
from mqtool.simulate.model import SimMessage
from mqtool.simulate.runner import simulate
from mqtool.simulate.spool import RecordSpool
from mqtool.simulate.timerroll import TimerRolls
from mqtool.store.store import Store

START = 1_800_000_000_000
DAY = 86_400_000
N = 180


def _build(root):
    """N timer messages due 2-3 days on (all past the 2-day roll window: one roll slot holds them all),
    of every kind a row must tell apart."""
    config = BrokerConfig.for_version("5.3")
    with StoreWriter(root, config) as w:
        for i in range(N):
            out = START + 2 * DAY + 3_600_000 + i * 397_000
            props = [
                ("REAL_TOPIC", "BenchTopic" if i % 13 else "Tö"),
                ("REAL_QID", str(i % 4)),
                ("TIMER_OUT_MS", str(out)),
            ]
            uk = [f"T{i:08X}", f"7F00000100002A9F{i:016X}", f"id-{i}-abc", None, f"P%{i:04d}"][i % 5]
            if uk is not None:
                props.append(("UNIQ_KEY", uk))
            if i % 6 == 1:
                props.append(("KEYS", "clé ünï"))  # non-ASCII: the UTF-8 length counts
            if i % 7 == 2:  # set by an earlier dequeue: replaced, not added
                props += [("TIMER_ENQUEUE_MS", "17"), ("TIMER_DEQUEUE_MS", "1799999999999"), ("TIMER_ROLL_TIMES", "4")]
            if i % 8 == 3:
                props.append(("TAGS", f"tag{i % 3}"))
            if i % 17 == 5:
                props = [(k, v) for k, v in props if k != "REAL_QID"] + [("REAL_QID", "x")]  # no row: read whole
            fields = {}
            if i % 11 == 4:
                fields = {
                    "sys_flag": BORNHOST_V6 | STOREHOST_V6,
                    "born_host": "[::1]:7",
                    "store_host": "[fe80::1]:10911",
                }
            put_message(
                w,
                TIMER_TOPIC,
                0,
                b"x" * (i % 9),
                props,
                store_timestamp=START - 1000,
                born_timestamp=START - 1000 - i,
                **fields,
            )
        w.write_timercheck(START - 1000, 0, 0, 0)
        w.write_checkpoint()
    return Store.open(root, config), config


def _run(store, config, monkeypatch, batch=True, rows=True, chunks=None, answered=None):
    """(event lines, result, the records `append` put in the spool by offset, those the rows stand for, the
    sources rolled from the bytes `read_plain` read); `chunks` gets the number of units each `TimerRolls.sources`
    call covers, `answered` the number of `TimerRolls.enqueue_values`' answers that are not None."""
    spooled, rebuilt = {}, {}
    put, put_row = RecordSpool.put, RecordSpool.put_row
    roll_sources, roll_enqueue = TimerRolls.sources, TimerRolls.enqueue_values

    def spy_sources(self, units, lo, hi):
        if chunks is not None:
            chunks.append(len(units[lo:hi]))
        return roll_sources(self, units, lo, hi)

    def spy_enqueue(self, phys):
        got = roll_enqueue(self, phys)
        if answered is not None and got is not None:
            answered.append(phys)
        return got

    def spy_put(self, m):
        spooled[m.phys] = [getattr(m, f) for f in SimMessage.__slots__]
        return put(self, m)

    def spy_put_row(self, phys, row, rebuild):
        put_row(self, phys, row, rebuild)
        m = self.get(phys)
        rebuilt[phys] = [getattr(m, f) for f in SimMessage.__slots__]

    with monkeypatch.context() as mp:
        use_reference(mp, not batch)
        mp.setattr(RecordSpool, "put", spy_put)
        mp.setattr(RecordSpool, "put_row", spy_put_row)
        if not rows:
            mp.setattr(TimerRolls, "keep", lambda *a: False)
        mp.setattr(TimerRolls, "sources", spy_sources)
        mp.setattr(TimerRolls, "enqueue_values", spy_enqueue)
        sink = io.StringIO()
        res = simulate(store, config, START, START + 4 * DAY, None, seed=1, sink=sink)
    return sink.getvalue(), res, spooled, rebuilt


@pytest.mark.parametrize("chunk", [timerdequeue.ROLL_CHUNK, 16])
def test_roll_rows_equal_the_per_message_walk(tmp_path, monkeypatch, chunk):
    """The roll slots read batch-wise (`read_plain`; in one read or 16 units at a time): the same log."""
    monkeypatch.setattr(timerdequeue, "ROLL_CHUNK", chunk)
    store, config = _build(tmp_path / "s")
    per_msg, r1, spooled1, _ = _run(store, config, monkeypatch, batch=False)
    chunks, answered = [], []
    batched, r2, spooled2, rebuilt = _run(store, config, monkeypatch, chunks=chunks, answered=answered)
    assert batched == per_msg
    assert r2.summary == r1.summary and r2.violations == r1.violations
    rolls = per_msg.count('"event":"roll"')
    assert rolls == N and per_msg.count('"service":"timer","event":"deliver"') == N
    # every roll kept as a row but those with a REAL_QID (i % 17 == 5) or UNIQ_KEY (lower-case hex, i % 5 == 2)
    # a row cannot hold: 45 of them, put whole in the spool
    no_row = sum(i % 17 == 5 or i % 5 == 2 for i in range(N))
    assert no_row == 45
    assert len(rebuilt) == N - no_row and len(spooled2) == no_row
    # the records the rows stand for are those the per-message walk put, field for field
    assert {p: spooled1[p] for p in rebuilt} == rebuilt
    # two roll slots: +1 day (window / 2, the 137 due in under 16 h past the window) and +2 days (43), each
    # read in chunks of ROLL_CHUNK: one each (4096), or 8 of 16 and the last 9 (137 = 8 * 16 + 9), then 2 of 16
    # and the last 11 (43 = 2 * 16 + 11)
    assert chunks == ([137, 43] if chunk >= 137 else [16] * 8 + [9] + [16, 16, 11])
    # the enqueue takes every re-put kept as a row by its columns: N - no_row = 135 answers
    assert len(answered) == N - no_row == 135


def test_rebuilt_roll_equals_the_appended_one(tmp_path, monkeypatch):
    """Rows off (every roll through `append` and the spool) against rows on, in the same batch walk."""
    store, config = _build(tmp_path / "s")
    log1, _r1, spooled, rebuilt_off = _run(store, config, monkeypatch, rows=False)
    log2, _r2, _, rebuilt = _run(store, config, monkeypatch)
    assert log1 == log2
    # rows off: all N rolls put whole in the spool, none kept as a row
    assert len(spooled) == N == 180 and rebuilt_off == {}
    # rows on: N less the 45 a row cannot hold (see test_roll_rows_equal_the_per_message_walk)
    assert len(rebuilt) == N - 45 == 135 and {p: spooled[p] for p in rebuilt} == rebuilt
    # the three properties a roll sets
    first = rebuilt[min(rebuilt)]
    props = first[SimMessage.__slots__.index("props")]
    # the first row's record had no TIMER_ROLL_TIMES (not one of i % 7 == 2's "4"): rolled once
    assert props["TIMER_ROLL_TIMES"] == "1" and props["TIMER_ENQUEUE_MS"] == str(START)
