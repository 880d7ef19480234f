"""simulate and trace read a DLedger CommitLog (records at entry pos + 48) exactly as a normal one.

The same records (dledger-5.3.1's, delayed messages included, plus timer and transaction half messages
made here) are written once as a normal store and once as a DLedger store; the event logs, summaries and
trace verdicts must be equal once each physical offset is mapped to the other store's."""

import json
import os
import subprocess
import sys

import pytest
from dledgerkit import check_continuation, simulate_out

from conftest import ORACLE, need_oracle
from mqtool.builder.dledger import DLedgerStoreWriter
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.store.store import Store, last_file_store_timestamp

START, UNTIL = "1795458370384", "+2d"
CONF = {"mappedFileSizeCommitLog": "16384", "mappedFileSizeConsumeQueue": "300"}


def _extra(w: StoreWriter, ts: int) -> list:
    """A timer message due in 90 s, one cancelled, and a half message never answered."""
    return [w.make_record("rmq_sys_wheel_timer", 0, b"t", {"UNIQ_KEY": "TIMER1", "TIMER_OUT_MS": str(ts + 90_000),
                                                          "REAL_TOPIC": "TopicA", "REAL_QID": "0"},
                          store_timestamp=ts, born_timestamp=ts),
            w.make_record("RMQ_SYS_TRANS_HALF_TOPIC", 0, b"h", {"UNIQ_KEY": "HALF1", "TRAN_MSG": "true",
                                                               "PGROUP": "PG", "KEYS": "half-1",
                                                               "REAL_TOPIC": "TopicA", "REAL_QID": "0"},
                          store_timestamp=ts, born_timestamp=ts)]


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    need_oracle()
    src = list(Store.open(ORACLE / "dledger-5.3.1" / "store").commitlog.iter_records())
    config = BrokerConfig().with_overrides(CONF)
    base = tmp_path_factory.mktemp("parity")
    normal, dledger = base / "normal", base / "dledger"
    with StoreWriter(normal, config) as w:
        recs = src + _extra(w, src[-1].store_timestamp)
        qoffs = [r.queue_offset for r in src] + [None, None]
        placed_n = [w.append_records([r], [q])[0] for r, q in zip(recs, qoffs, strict=True)]
        w.write_timercheck(src[0].store_timestamp // 1000 * 1000)  # a timer store that has read nothing yet
    d = DLedgerStoreWriter(dledger, config)
    placed_d = [d.put(r, queue_offset=r.queue_offset if i < len(src) else None) for i, r in enumerate(recs)]
    d.store.write_timercheck(src[0].store_timestamp // 1000 * 1000)
    d.close()
    (base / "broker.conf").write_text("".join(f"{k}={v}\n" for k, v in CONF.items()))
    to_d = {a.physical_offset: b.physical_offset for a, b in zip(placed_n, placed_d, strict=True)}
    assert any(a != b for a, b in to_d.items())  # the layouts really differ
    to_d["end"] = placed_d[-1].physical_offset + placed_d[-1].total_size  # where the next entry's header goes
    return normal, dledger, base / "broker.conf", to_d


def _run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mqtool", *map(str, args)], capture_output=True, text=True,
                          env=os.environ, timeout=300)


def _events(store, conf, tmp, name):
    ev = tmp / f"{name}.jsonl"
    p = _run("simulate", store, "--start", START, "--until", UNTIL, "--config", conf, "--events", ev, "--json")
    assert p.returncode == 0, p.stderr
    return [json.loads(x) for x in ev.read_text().splitlines()], json.loads(p.stdout.splitlines()[-1])


def test_simulate_gives_the_same_events_on_both_layouts(stores, tmp_path):
    normal, dledger, conf, to_d = stores
    ev_n, sum_n = _events(normal, conf, tmp_path, "n")
    ev_d, sum_d = _events(dledger, conf, tmp_path, "d")
    kinds = {e["event"] for e in ev_n}
    assert {"deliver", "persist"} <= kinds and any(e["service"] == "timer" for e in ev_n)
    assert any(e["service"] == "transaction" for e in ev_n)
    assert len(ev_n) == len(ev_d)
    for n, d in zip(ev_n, ev_d, strict=True):  # a re-put's offset is mapped from its event on
        if n.get("physical_offset") in to_d:
            n["physical_offset"] = to_d[n["physical_offset"]]
        new_n, new_d = n.pop("new_physical_offset", None), d.pop("new_physical_offset", None)
        assert (new_n is None) == (new_d is None)
        if new_n is not None:
            to_d[new_n] = new_d
    assert ev_d == ev_n
    assert sum_d == sum_n


def test_trace_gives_the_same_verdict_on_both_layouts(stores):
    normal, dledger, conf, _ = stores
    for key in ("TIMER1", "HALF1"):
        out = []
        for store in (normal, dledger):
            p = _run("trace", store, "--uniq-key", key, "--config", conf, "--now", START, "--until", "+1h", "--json")
            assert p.returncode == 0, p.stderr
            out.append(json.loads(p.stdout))
        assert out[0]["verdict"] == out[1]["verdict"], key
        print(key, out[0]["verdict"])


def test_a_re_put_on_dledger_goes_to_the_next_entrys_body(stores, tmp_path):
    _, dledger, conf, to_d = stores
    ev, _ = _events(dledger, conf, tmp_path, "d")
    first_new = next(e["new_physical_offset"] for e in ev if e.get("new_physical_offset") is not None)
    assert first_new == to_d["end"] + 48  # DLedgerMmapFileStore.appendAsLeader: body after the 48-byte header


def test_out_writes_the_same_records_on_both_layouts(stores, tmp_path):
    """--out on the DLedger store writes every re-put (schedule, timer, transaction) as a DLedger entry;
    read back, the new records equal those --out appends to the normal store but for where they lie."""
    normal, dledger, conf, _ = stores
    _, r_n = simulate_out(normal, conf, UNTIL, tmp_path / "n", START)
    _, r_d = simulate_out(dledger, conf, UNTIL, tmp_path / "d", START)
    new = check_continuation(dledger, tmp_path / "d", conf, r_d, term=0)
    services = {m.service for m in r_d.state["model"].appended}
    assert {"schedule", "timer", "transaction"} <= services
    end = Store.open(normal).commitlog.max_offset()
    ours = [r for r in Store.open(tmp_path / "n").commitlog.iter_records() if r.physical_offset >= end]
    fields = ("topic", "queue_id", "queue_offset", "total_size", "body", "properties_raw", "store_timestamp",
              "sys_flag", "flag", "reconsume_times")
    assert [[getattr(r, f) for f in fields] for r in ours] == [[getattr(e.record, f) for f in fields] for e in new]


def test_the_last_sign_of_life_reads_the_last_dledger_data_file(stores):
    """`Store.last_activity_ms` (simulate's default start, trace's now) walks the entries' bodies, not
    the data file as if it were a CommitLog file (which found no record and fell back to the timercheck)."""
    normal, dledger, _, _ = stores
    newest = max(r.store_timestamp for r in Store.open(normal).commitlog.iter_records())
    assert last_file_store_timestamp(Store.open(dledger).commitlog) == newest
    assert last_file_store_timestamp(Store.open(normal).commitlog) == newest
    assert Store.open(dledger).last_activity_ms() == Store.open(normal).last_activity_ms()
