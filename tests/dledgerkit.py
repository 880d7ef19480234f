"""DLedger test kit: a store converted from normal mode to DLedger, built from basic-5.3.1 (spec §12), and
the checks of a store `simulate --out` continued (`check_continuation`)."""

import json
import struct
from pathlib import Path

from conftest import ORACLE, need_oracle
from mqtool.formats.broker_conf import load_broker_conf
from mqtool.formats.commitlog import BLANK_MAGIC_CODE
from mqtool.formats.dledger import (
    BLANK_MAGIC,
    INDEX_UNIT_SIZE,
    build_checkpoint,
    dledger_entry,
    index_unit,
    parse_checkpoint,
    parse_currterm,
)
from mqtool.simulate.prepare import finish_run, prepare_run
from mqtool.simulate.runner import simulate
from mqtool.store.dledger import DLedgerCommitLog
from mqtool.store.findings import Findings
from mqtool.store.store import Store


def _entry(pos: int, index: int, record: bytes) -> bytes:
    body = record[:28] + struct.pack(">q", pos + 48) + record[36:]  # the append hook's PHYSICALOFFSET
    return dledger_entry.build({"magic": 1, "index": index, "term": 0, "pos": pos, "channel": 0,
                                "chain_crc": 0, "body_crc": 0, "body": body})


def make_converted_store(tmp_path):
    """basic-5.3.1's CommitLog + DLedger data from dividedCommitlogOffset, as `setRecoverPosition` leaves it.

    Returns (root, old records of commitlog.jsonl, dividedCommitlogOffset, end of the DLedger data,
    the first CommitLog file's bytes); entries 0..2 copy the first three old records.
    """
    need_oracle()
    src = ORACLE / "basic-5.3.1"
    root = tmp_path / "store"
    (root / "commitlog").mkdir(parents=True)
    old = [json.loads(x) for x in (src / "commitlog.jsonl").read_text().splitlines()]
    old = [r for r in old if not r.get("blank")]
    files = sorted((src / "store/commitlog").iterdir())
    for f in files:
        (root / "commitlog" / f.name).write_bytes(f.read_bytes())
    last = root / "commitlog" / files[-1].name
    size = last.stat().st_size
    end = max(r["physicalOffset"] + r["storeSize"] for r in old)
    divided = int(files[-1].name) + size
    with open(last, "r+b") as fh:  # the BLANK the first DLedger start writes over the unused tail
        fh.seek(end - int(files[-1].name))
        fh.write(struct.pack(">ii", divided - end, BLANK_MAGIC_CODE))
    data = bytes((root / "commitlog" / files[0].name).read_bytes())
    bodies = [data[r["physicalOffset"] : r["physicalOffset"] + r["storeSize"]] for r in old[:3]]
    home = root / "dledger-n0"
    (home / "data").mkdir(parents=True)
    (home / "index").mkdir()
    raw, units, pos = b"", b"", divided
    for i, b in enumerate(bodies):
        e = _entry(pos, i, b)
        units += index_unit.build({"magic": 1, "pos": pos, "size": len(e), "index": i, "term": 0})
        raw, pos = raw + e, pos + len(e)
    (home / "data" / f"{divided:020d}").write_bytes(raw + bytes(size - len(raw)))
    (home / "index" / f"{0:020d}").write_bytes(units + bytes(1024 - len(units)))
    (home / "checkpoint").write_text(build_checkpoint(2, 2))
    return root, old, divided, pos, data


ORACLE_CONF = "mappedFileSizeCommitLog=16384\nmappedFileSizeConsumeQueue=300\nmaxHashSlotNum=100\nmaxIndexNum=400\n"
# written by finish_run as a restarted broker would: not part of the untouched prefix
REWRITTEN = {"checkpoint", "checkpoint.bak", "currterm", "currterm.bak"}


def simulate_out(store: Path, conf: Path, until: str, out: Path, start: str | None = None):
    """simulate --out in-process (the CLI's three steps); returns (run, result)."""
    run = prepare_run(store, until, start=start, config_path=conf, out=out)
    result = simulate(run.store, run.config, run.start_ms, run.until_ms, run.scenario, run.seed,
                      run.broker_version, keep_records=True)
    assert finish_run(run, result) == []
    return run, result


def entries_of(root: Path, conf: Path):
    dl = DLedgerCommitLog.open(root)
    findings = Findings()
    summary = dl.audit(findings)
    return dl, list(dl.iter_entries(Findings())), summary, findings


def check_continuation(src: Path, out: Path, conf: Path, result, term: int) -> list:
    """The checks both stores share; returns the new entries."""
    config = load_broker_conf(conf)
    _, old, _, _ = entries_of(src, conf)
    dl, entries, summary, findings = entries_of(out, conf)
    assert [(f.severity, f.message) for f in findings if f.severity != "info"] == []
    new = entries[len(old):]
    assert [(e.offset, e.index, e.term, e.size) for e in entries[:len(old)]] == \
        [(e.offset, e.index, e.term, e.size) for e in old]
    model = result.state["model"].appended
    assert len(new) == len(model) > 0
    # consecutive indexes after the last one, in the node's term
    assert [e.index for e in new] == list(range(old[-1].index + 1, old[-1].index + 1 + len(new)))
    assert {e.term for e in new} == {term}
    # each entry at the previous one's end, or at the next file after a filler that fills the file
    fs = config.mapped_file_size_commitlog
    prev = old[-1]
    for e in new:
        end = prev.offset + prev.size
        if e.offset != end:
            assert e.offset == (end // fs + 1) * fs and fs - end % fs < e.size + 8
            raw = (out / dl.rel(dl.data.file_for(end))).read_bytes()[end % fs:end % fs + 8]
            assert struct.unpack(">ii", raw) == (BLANK_MAGIC, fs - end % fs)
        assert e.pos == e.offset
        prev = e
    # the record inside each entry is what the simulation re-put, at pos + 48, read back equal
    deliveries = {ev.new_physical_offset: ev for ev in result.events if ev.new_physical_offset is not None}
    st = Store.open(out, config)
    for e, m in zip(new, model, strict=True):
        r = e.record
        assert r.physical_offset == e.pos + 48 == m.phys
        assert (r.topic, r.queue_id, r.queue_offset, r.total_size) == (m.topic, m.queue_id, m.queue_offset, m.size)
        assert (r.body, r.properties_raw, r.store_timestamp, r.born_timestamp, r.sys_flag, r.flag,
                r.reconsume_times) == (m.body, result.state["model"].raw(m), m.store_ts, m.born_ts, m.sys_flag,
                                       m.flag, m.reconsume_times)
        ev = deliveries[r.physical_offset]  # every re-put is an event's new_physical_offset
        if ev.event == "deliver":  # a delivery names the queue and offset it re-put to
            assert (ev.topic, ev.queue_id, ev.detail["queue_offset"]) == (r.topic, r.queue_id, r.queue_offset)
        unit = st.consume_queue(r.topic, r.queue_id).unit(r.queue_offset)
        assert (unit.commitlog_offset, unit.size) == (e.pos + 48, e.body_length)
        isize = dl.index.file_size
        start, at = divmod(e.index * INDEX_UNIT_SIZE, isize)
        raw = (out / "dledger-n0/index" / f"{start * isize:020d}").read_bytes()
        u = index_unit.parse(raw[at:at + INDEX_UNIT_SIZE])
        assert (u.magic, u.pos, u.size, u.index, u.term) == (1, e.pos, e.size, e.index, term)
    cp = parse_checkpoint((out / "dledger-n0/checkpoint").read_text())
    assert cp == {"end_index": new[-1].index, "committed_index": new[-1].index}
    assert summary["committed_pos"] == new[-1].offset + new[-1].size == st.commitlog.max_offset()
    assert parse_currterm((out / "dledger-n0/currterm").read_text())["curr_term"] == term
    term_file = src / "dledger-n0/currterm"  # the vote persisted again: the old text kept as .bak, if any
    bak = out / "dledger-n0/currterm.bak"
    assert (bak.read_bytes() == term_file.read_bytes()) if term_file.exists() else not bak.exists()
    check_prefix(src, out)
    return new


def check_prefix(src: Path, out: Path) -> None:
    """Every byte the source wrote is in the new store at the same place (files only grow)."""
    for f in sorted(p for p in src.rglob("*") if p.is_file()):
        rel = f.relative_to(src)
        if f.name in REWRITTEN or rel.parts[0] in ("index", "config"):
            continue  # rewritten as the broker would (IndexFile header, checkpoints, offsets files)
        data = f.read_bytes().rstrip(b"\x00")
        assert (out / rel).read_bytes()[:len(data)] == data, rel
