"""The fast scans agree with the Construct definitions and the struct decoder, record by record.

The scan runs the extension's kernels (`mqtool._native`); every case also runs the plain-Python walk
and column kernels (`store/walk.py`, `store/kernels.py`: the fallback) and asserts the same columns,
stops and pairs, chunk by chunk.

- every record of every oracle store: kernel columns == `commitlog_record.parse`, records ==
  `decode_message`, Arrow rows == both;
- generated records (V1/V2, IPv4/IPv6, empty bodies, odd properties) in generated files;
- damaged files: the same records, findings, stop reasons and positions as the reference walk
  below (the record-at-a-time walk `CommitLog` used before the fast path);
- ConsumeQueue / TimerLog / TimerWheel views == their Construct structs.
"""

import struct
from contextlib import nullcontext
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from recordkit import draw_flags_and_topic, ipv4, ipv6

from conftest import ORACLE, ORACLE_STORES, need_oracle
from mqtool.formats.commitlog import (
    BLANK_MAGIC_CODE,
    MESSAGE_MAGIC_CODE,
    MESSAGE_MAGIC_CODE_V2,
    body_crc,
    commitlog_record,
)
from mqtool.formats.consumequeue import consumequeue_unit, is_empty_unit
from mqtool.formats.message import RecordError, decode_message, peek_magic, record_from_container
from mqtool.formats.properties import build_properties, parse_properties
from mqtool.formats.timerlog import TIMERLOG_DTYPE, timerlog_unit
from mqtool.formats.timerwheel import timerwheel_slot
from mqtool.store import fastscan as fs
from mqtool.store.commitlog import CommitLog
from mqtool.store.store import Store

NATIVE, PYTHON = fs.compiled_kernels(), fs.python_kernels()


def test_the_scan_runs_the_extension():
    """The check the equality tests below rely on: the extension is built and is what the scan runs."""
    assert NATIVE.native and not PYTHON.native
    assert type(NATIVE.walk).__module__ == "mqtool._native"


def assert_kernels_agree(buf, verify_crc: bool = True, chunk_records: int = fs.DEFAULT_CHUNK, start: int = 0) -> None:
    """The extension's walk and the plain-Python walk give the same chunks (columns, end, stop, detail),
    and the column kernels the same bytes, pairs and host keys on them."""
    a = fs.as_array(buf)
    pos = start
    tables = [NATIVE.topic_table(), PYTHON.topic_table()]
    while True:
        outs = np.full((2, fs.NCOL, chunk_records), -7, np.int64)
        got = [k.walk(a, pos, verify_crc, out) for k, out in zip((NATIVE, PYTHON), outs, strict=True)]
        assert got[0] == got[1]
        n, end, stop, _ = got[0]
        assert (outs[0] == outs[1]).all()
        # the same walk numbering the topics: the same chunk, each row's topic number, the same names
        ids = np.full((2, chunk_records), -7, np.int64)
        again = np.full((2, fs.NCOL, chunk_records), -7, np.int64)
        numbered = [k.walk(a, pos, verify_crc, o, t, i) for k, o, t, i in zip((NATIVE, PYTHON), again, tables, ids,
                                                                               strict=True)]
        assert numbered == got and (again == outs).all()
        assert (ids[0] == ids[1]).all() and tables[0].names == tables[1].names
        assert [tables[1].names[i] for i in ids[1, :n]] == [bytes(a[p : p + m]) for p, m in zip(
            outs[1, fs.C_TOPIC_POS, :n].tolist(), outs[1, fs.C_TOPIC_LEN, :n].tolist(), strict=True)]
        assert_column_kernels_agree(a, outs[0][:, :n])
        if stop != fs.STOP_MORE:
            return
        pos = end


def assert_column_kernels_agree(a, cols) -> None:
    starts, lens = cols[fs.C_PROPS_POS].copy(), cols[fs.C_PROPS_LEN].copy()
    n = len(starts)
    results = []
    for k in (NATIVE, PYTHON):
        for cap in (1, n * 8 + 1):  # too small (-1) unless no record has a pair, then large enough
            rec_offsets = np.full(n + 1, -3, np.int32)
            arrays = np.full((4, cap), -5, np.int64)
            m = k.property_pairs(a, starts, lens, rec_offsets, *arrays)
            results.append((m, rec_offsets[: n + 1 if m >= 0 else 0].tolist(),
                            arrays[:, : max(m, 0)].tolist()))
        offsets = np.zeros(n + 1, np.int32)
        np.cumsum(cols[fs.C_BODY_LEN], out=offsets[1:])
        data = np.zeros(int(offsets[-1]), np.uint8)
        k.gather(a, cols[fs.C_BODY_POS].copy(), cols[fs.C_BODY_LEN].copy(), offsets, data)
        v4 = (cols[fs.C_SYS_FLAG] & 0x10) == 0
        keys = np.zeros(int(v4.sum()), np.int64)
        k.host_keys(a, cols[fs.C_BORN_HOST][v4], keys)
        results.append((data.tobytes(), keys.tolist()))
    assert results[:3] == results[3:]


FIELDS = {  # kernel column -> Construct field of `commitlog_record.message`
    "body_crc": "body_crc", "queue_id": "queue_id", "flag": "flag", "queue_offset": "queue_offset",
    "physical_offset_field": "physical_offset", "sys_flag": "sys_flag", "born_timestamp": "born_timestamp",
    "store_timestamp": "store_timestamp", "reconsume_times": "reconsume_times",
    "prepared_transaction_offset": "prepared_transaction_offset",
}


# ----------------------------------------------------------------- the reference (record-at-a-time) walk
def reference_walk(buf, base: int, verify_crc: bool = True):
    """`CommitLog._walk` as it was before the fast path: (records, findings, stop reason, end)."""
    pos, records, findings = 0, [], []
    while True:
        head = peek_magic(buf, pos)
        if head is None:
            return records, findings, "end of file", pos
        total, magic = head
        if magic == BLANK_MAGIC_CODE:
            if total != len(buf) - pos:
                findings.append((base + pos, "warning",
                                 f"BLANK filler declares {total} bytes, {len(buf) - pos} remain in the file"))
            return records, findings, "blank filler", pos
        if total == 0 and magic == 0:
            return records, findings, "unwritten (zero) tail", pos
        try:
            rec = decode_message(buf, pos, base)
        except RecordError as e:
            findings.append((base + pos, "error", f"{e.reason}; the broker's recovery treats this as the end of "
                             "valid data (torn tail)"))
            return records, findings, f"invalid record: {e.reason}", pos
        if rec.total_size != rec.computed_size or rec.total_size <= 0:
            findings.append((base + pos, "error", f"TOTALSIZE {rec.total_size} != computed length "
                             f"{rec.computed_size}; the broker's recovery treats this as the end of valid data"))
            return records, findings, "invalid record: size mismatch", pos
        rec.position = pos
        if rec.physical_offset_field != rec.physical_offset:
            findings.append((rec.physical_offset, "error", f"PHYSICALOFFSET field {rec.physical_offset_field} "
                             f"!= position {rec.physical_offset}"))
        if verify_crc and not rec.crc_ok:
            findings.append((rec.physical_offset, "error", f"body CRC mismatch (stored {rec.body_crc}); "
                             "recovery with checkCRCOnRecover stops here"))
        records.append(rec)
        pos += rec.total_size


def fast_walk(buf, base: int, verify_crc: bool = True, chunk_records: int = fs.DEFAULT_CHUNK):
    """The same outcome through the fast path (chunks, records_from_chunk, findings helpers)."""
    records, findings = [], []
    for chunk in fs.iter_commitlog_chunks(buf, base, 0, verify_crc, chunk_records):
        rows = {}
        for row, message in fs.record_findings(chunk):
            rows.setdefault(row, []).append(message)
        for row, rec in enumerate(fs.records_from_chunk(buf, chunk)):
            findings += [(rec.physical_offset, "error", m) for m in rows.get(row, ())]
            records.append(rec)
        if chunk.finished:
            stop = fs.stop_finding(buf, chunk.stop, chunk.detail, chunk.end)
            if stop:
                findings.append((base + chunk.end, *stop))
            return records, findings, fs.stop_reason(chunk.stop, chunk.detail), chunk.end


def assert_same_walk(buf, base: int, verify_crc: bool = True, chunk_records: int = fs.DEFAULT_CHUNK):
    assert_kernels_agree(buf, verify_crc, chunk_records)
    ref = reference_walk(buf, base, verify_crc)
    fast = fast_walk(buf, base, verify_crc, chunk_records)
    assert fast[1:] == ref[1:]
    with fs.walk_ahead():  # the next chunk walked on a second thread: the same outcome
        assert fast_walk(buf, base, verify_crc, chunk_records) == fast
    assert len(fast[0]) == len(ref[0])
    for a, b in zip(fast[0], ref[0], strict=True):
        assert a == b
        assert a.position == b.position
        assert a.crc_ok == b.crc_ok
    return ref


def assert_columns_match_construct(buf, base: int):
    """Every kernel column of every record equals what `commitlog_record.parse` reads there."""
    res = fs.scan_commitlog_file(buf, base)
    data = bytes(buf)
    for i in range(len(res)):
        pos = int(res.pos[i])
        c = commitlog_record.parse(data[pos:])
        m = c.message
        assert (int(res.total_size[i]), int(res.magic_code[i])) == (c.total_size, c.magic_code)
        for col, name in FIELDS.items():
            assert int(getattr(res, col)[i]) == m[name], (pos, col)
        body = data[res.body_pos[i] : res.body_pos[i] + res.body_len[i]]
        assert body == m.body
        topic = data[res.topic_pos[i] : res.topic_pos[i] + res.topic_len[i]]
        assert topic.decode("utf-8", "surrogateescape") == m.topic
        props = data[res.props_pos[i] : res.props_pos[i] + res.props_len[i]]
        assert props.decode("utf-8", "surrogateescape") == m.properties
        assert int(res.props_pos[i] + res.props_len[i]) == pos + c.total_size
        born = data[res.born_host_pos[i] : res.born_host_pos[i] + (20 if m.sys_flag & 0x10 else 8)]
        store = data[res.store_host_pos[i] : res.store_host_pos[i] + (20 if m.sys_flag & 0x20 else 8)]
        assert (fs.host_text(born), fs.host_text(store)) == (m.born_host, m.store_host)
        assert (int(res.born_port[i]), int(res.store_port[i])) == (int(m.born_host.rpartition(":")[2]),
                                                                   int(m.store_host.rpartition(":")[2]))
        if len(body):
            assert int(res.computed_crc[i]) == body_crc(body)
    return res


def assert_arrow_matches(buf, base: int, file: str = "f"):
    """Arrow rows == the decoded records (properties as parsed pairs, hosts and topic as text)."""
    records, _, _, _ = reference_walk(buf, base)
    rows = []
    for chunk in fs.iter_commitlog_chunks(buf, base, 0, True, chunk_records=7):
        rows += fs.chunk_to_arrow(buf, chunk, file).to_pylist()
    assert len(rows) == len(records)
    for row, rec in zip(rows, records, strict=True):
        expected = {k: getattr(rec, k) for k in (
            "physical_offset", "total_size", "magic_code", "body_crc", "queue_id", "flag", "queue_offset",
            "physical_offset_field", "sys_flag", "born_timestamp", "born_host", "store_timestamp", "store_host",
            "reconsume_times", "prepared_transaction_offset", "body", "topic")}
        expected |= {"file": file, "crc_ok": rec.crc_ok, "properties": list(rec.properties.items())}
        if "\udc80" <= max(rec.topic + rec.properties_raw, default=" "):
            continue  # invalid UTF-8 has no Arrow string: only the raw bytes are compared (above)
        assert row == expected


# ----------------------------------------------------------------- oracle stores
@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(ORACLE_STORES))
def test_oracle_every_record_matches_construct_and_decoder(name):
    need_oracle()
    log = CommitLog.open(ORACLE / ORACLE_STORES[name][0])
    total = 0
    for f in log.files:
        buf = f.path.read_bytes()
        res = assert_columns_match_construct(buf, f.start)
        records, findings, _, _ = assert_same_walk(buf, f.start)
        assert findings == []
        for rec, (i, pos) in zip(records, enumerate(res.pos.tolist()), strict=True):
            ref = record_from_container(commitlog_record.parse(buf[pos:]), f.start + pos)
            ref.position = pos
            assert rec == ref
            assert bool(res.crc_ok[i])
        assert_arrow_matches(buf, f.start, log.rel(f))
        total += len(records)
    assert total > 20


@pytest.mark.oracle
def test_oracle_scan_columns_equals_iter_records():
    need_oracle()
    log = CommitLog.open(ORACLE / "basic-5.3.1/store")
    records = list(log.iter_records())
    scans = {k: (v.valid_bytes, v.stop_reason, v.records) for k, v in log.scans.items()}
    offsets = []
    for f, chunk in log.scan_columns(chunk_records=5):
        assert f in log.files
        offsets += chunk.physical_offset.tolist()
    assert offsets == [r.physical_offset for r in records]
    assert {k: (v.valid_bytes, v.stop_reason, v.records) for k, v in log.scans.items()} == scans
    assert log.findings == []


@pytest.mark.oracle
@pytest.mark.parametrize("name", sorted(ORACLE_STORES))
def test_oracle_fixed_size_views_match_construct(name):
    need_oracle()
    store = Store.open(ORACLE / ORACLE_STORES[name][0])
    for cq in store.consume_queues():
        for f in cq.queue.files:
            data = f.path.read_bytes()
            units, ended = fs.cq_units(data)
            for i, u in enumerate(units):
                c = consumequeue_unit.parse(data[i * 20 : i * 20 + 20])
                assert (int(u["commitlog_offset"]), int(u["size"]), int(u["tags_code"])) == (
                    c.commitlog_offset, c.size, c.tags_code)
            rest = [consumequeue_unit.parse(data[i : i + 20]) for i in range(len(units) * 20, len(data) - 19, 20)]
            assert ended == (bool(rest) and is_empty_unit(rest[0].commitlog_offset, rest[0].size,
                                                          rest[0].tags_code))
    if store.timerlog is not None:
        for f in store.timerlog.queue.files:
            data = f.path.read_bytes()
            units = fs.timerlog_units(data)
            assert len(units) > 0
            for i, u in enumerate(units):
                c = timerlog_unit.parse(data[i * 52 : i * 52 + 52])
                assert tuple(int(u[k]) for k in TIMERLOG_DTYPE.names) == tuple(c[k] for k in TIMERLOG_DTYPE.names)
    wheel = ORACLE / ORACLE_STORES[name][0] / "timerwheel.gz"
    if wheel.exists():
        import gzip

        data = gzip.decompress(wheel.read_bytes())
        slots = fs.timerwheel_slots(data)
        for i in np.flatnonzero(slots["time_units"] != 0).tolist():
            c = timerwheel_slot.parse(data[i * 32 : i * 32 + 32])
            assert tuple(int(slots[i][k]) for k in ("time_units", "first_pos", "last_pos", "num", "magic")) == (
                c.time_units, c.first_pos, c.last_pos, c.num, c.magic)


# ----------------------------------------------------------------- generated records
text = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=["Cs"]), max_size=12)


@st.composite
def records(draw, physical_offset: int = 0):
    born_v6, store_v6, sys_flag, v2, topic = draw_flags_and_topic(draw, 0, 150, 30)
    body = draw(st.one_of(st.just(b""), st.binary(max_size=400)))
    # names and values may be empty (skipped segments) and repeated (last value wins)
    pairs = draw(st.lists(st.tuples(st.sampled_from(["KEYS", "TAGS", "a"]) | text, text), max_size=6))
    props = build_properties(pairs) + draw(st.sampled_from(["", "\x02", "x", "\x01y\x02", "k\x01"]))
    port = st.integers(-(2**31), 2**31 - 1)
    return {
        "total_size": 0, "magic_code": MESSAGE_MAGIC_CODE_V2 if v2 else MESSAGE_MAGIC_CODE,
        "message": {
            "body_crc": body_crc(body) if draw(st.integers(0, 9)) else draw(st.integers(0, 2**31 - 1)),
            "queue_id": draw(st.integers(-(2**31), 2**31 - 1)), "flag": draw(st.integers(-(2**31), 2**31 - 1)),
            "queue_offset": draw(st.integers(-(2**63), 2**63 - 1)), "physical_offset": physical_offset,
            "sys_flag": sys_flag, "born_timestamp": draw(st.integers(-(2**63), 2**63 - 1)),
            "born_host": f"{draw(ipv6 if born_v6 else ipv4)}:{draw(port)}",
            "store_timestamp": draw(st.integers(0, 2**45)),
            "store_host": f"{draw(ipv6 if store_v6 else ipv4)}:{draw(port)}",
            "reconsume_times": draw(st.integers(-5, 16)),
            "prepared_transaction_offset": draw(st.integers(-(2**63), 2**63 - 1)),
            "body": body, "topic": topic, "properties": props,
        },
    }


@st.composite
def commitlog_files(draw):
    """A file: records at their positions (a few with a wrong PHYSICALOFFSET), then a BLANK filler,
    zeros, or nothing; base offset a multiple of the file size."""
    base = draw(st.sampled_from([0, 1 << 20, 5 << 30]))
    data = bytearray()
    for _ in range(draw(st.integers(0, 6))):
        rec = draw(records(base + len(data) + (draw(st.sampled_from([0] * 5 + [1, -7])))))
        data += commitlog_record.build(rec)
    end = draw(st.sampled_from(["blank", "zeros", "none", "short-blank"]))
    if end == "blank":
        data += struct.pack(">ii", 64, BLANK_MAGIC_CODE) + bytes(56)
    elif end == "short-blank":
        data += struct.pack(">ii", 999, BLANK_MAGIC_CODE)
    elif end == "zeros":
        data += bytes(draw(st.integers(0, 40)))
    return base, bytes(data)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(commitlog_files(), st.booleans(), st.integers(1, 4))
def test_generated_files_same_as_reference_and_construct(file, verify, chunk_records):
    base, data = file
    assert_same_walk(data, base, verify, chunk_records)
    assert_columns_match_construct(data, base)
    assert_arrow_matches(data, base)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(commitlog_files(), st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 255)), min_size=1, max_size=4),
       st.one_of(st.none(), st.integers(0, 10**6)))
def test_damaged_files_same_findings_and_stop(file, flips, cut):
    """Corrupted bytes and cut files: same records, findings, stop reason and position as the reference."""
    base, data = file
    if not data:
        return
    b = bytearray(data)
    for pos, value in flips:
        b[pos % len(b)] = value
    if cut is not None:
        b = b[: cut % (len(b) + 1)]
    assert_same_walk(bytes(b), base, True, 3)


@pytest.mark.parametrize("field_at,value,reason", [
    (0, struct.pack(">i", -5), "invalid record: size mismatch"),
    (4, struct.pack(">i", 7), "invalid record: bad magic code 0x00000007"),
    (84, struct.pack(">i", -3), "invalid record: negative body length -3"),
    (84, struct.pack(">i", 10**6), "invalid record: body runs past the end of the data"),
])
def test_each_invalid_reason(field_at, value, reason):
    rec = {"total_size": 0, "magic_code": MESSAGE_MAGIC_CODE, "message": {
        "body_crc": body_crc(b"abc"), "queue_id": 1, "flag": 0, "queue_offset": 0, "physical_offset": 0,
        "sys_flag": 0, "born_timestamp": 0, "born_host": "1.2.3.4:5", "store_timestamp": 0,
        "store_host": "1.2.3.4:5", "reconsume_times": 0, "prepared_transaction_offset": 0, "body": b"abc",
        "topic": "T", "properties": "a\x01b\x02"}}
    data = bytearray(commitlog_record.build(rec) * 2)
    data[len(data) // 2 + field_at : len(data) // 2 + field_at + 4] = value
    _, _, stop, end = assert_same_walk(bytes(data), 0)
    assert (stop, end) == (reason, len(data) // 2)


def damaged_basic_store(tmp_path: Path) -> Path:
    """A copy of the basic oracle store with three damaged records: a body (CRC), a PHYSICALOFFSET, a TOTALSIZE."""
    need_oracle()
    import shutil

    root = shutil.copytree(ORACLE / "basic-5.3.1/store", tmp_path / "s")
    f = Path(root) / "commitlog/00000000000000000000"
    f.chmod(0o644)
    data = bytearray(f.read_bytes())
    data[251 + 100] ^= 0xFF  # second record's body: CRC
    data[502 + 28 : 502 + 36] = struct.pack(">q", 1)  # third record's PHYSICALOFFSET
    data[753:757] = struct.pack(">i", 999)  # fourth record's TOTALSIZE
    f.write_bytes(bytes(data))
    return Path(root)


def test_damaged_store_through_commitlog(tmp_path):
    """CommitLog.iter_records and scan_columns report the same findings and file ends."""
    root = damaged_basic_store(tmp_path)
    log = Store.open(root).commitlog
    n = len(list(log.iter_records()))
    by_records = (list(log.findings), {k: vars(v).copy() for k, v in log.scans.items()})
    m = sum(len(c) for _, c in log.scan_columns(chunk_records=2))
    assert (n, m) == (3 + 32, 3 + 32)
    assert (list(log.findings), {k: vars(v).copy() for k, v in log.scans.items()}) == by_records
    assert [(x.offset, x.message[:20]) for x in log.findings] == [
        (251, "body CRC mismatch (s"), (502, "PHYSICALOFFSET field"), (753, "TOTALSIZE 999 != com")]


@pytest.mark.parametrize("chunk_records", [1, 7, fs.DEFAULT_CHUNK])
def test_walk_ahead_gives_the_same_chunks_and_findings(chunk_records):
    """`walk_ahead` (the next chunk walked on a second thread) changes no column, end, stop or finding."""
    need_oracle()
    got = []
    for ahead in (False, True):
        log = CommitLog.open(ORACLE / "basic-5.3.1/store")
        with fs.walk_ahead() if ahead else nullcontext():
            chunks = [(f.start, c.cols.copy(), c.end, c.stop, c.detail) for f, c in log.scan_columns(
                chunk_records=chunk_records)]
        got.append((chunks, list(log.findings), {k: vars(v).copy() for k, v in log.scans.items()}))
    assert len(got[0][0]) == len(got[1][0]) and sum(c[1].shape[1] for c in got[0][0]) == 115  # the oracle's records
    for x, y in zip(got[0][0], got[1][0], strict=True):
        assert x[0] == y[0] and x[2:] == y[2:] and (x[1] == y[1]).all()
    assert got[0][1:] == got[1][1:]


@pytest.mark.parametrize("chunk_records", [1, 2, fs.DEFAULT_CHUNK])
def test_walk_ahead_checks_crcs_on_its_thread(tmp_path, chunk_records):
    """Inside `walk_ahead` the second thread's walk computes the body CRCs (`verify_crc`): a damaged body is the
    same finding at the same offset, the CRC column is the one-thread walk's, and without `verify_crc` it is
    left unset (-1) on both."""
    log = CommitLog.open(damaged_basic_store(tmp_path))
    for verify_crc in (True, False):
        got = []
        for ahead in (False, True):
            with fs.walk_ahead() if ahead else nullcontext():
                chunks = log.scan_columns(verify_crc=verify_crc, chunk_records=chunk_records)
                crcs = np.concatenate([c.cols[fs.C_CRC].copy() for _, c in chunks])
            got.append((crcs, [(x.offset, x.message) for x in log.findings]))
        assert (got[0][0] == got[1][0]).all() and got[0][1] == got[1][1]
        crcs, findings = got[1]
        assert len(crcs) == 3 + 32  # the first file's walk stops at its fourth record (TOTALSIZE 999)
        if verify_crc:
            assert (crcs >= 0).all() and (251, "body CRC mismatch (s") in [(o, m[:20]) for o, m in findings]
        else:
            assert (crcs == -1).all() and not any("CRC" in m for _, m in findings)


def test_abandoned_iteration_releases_the_mapping(tmp_path):
    """Breaking out of a scan must not leave the mmap exported (BufferError on close)."""
    need_oracle()
    log = CommitLog.open(ORACLE / "basic-5.3.1/store")
    for _ in log.iter_records():
        break
    it = log.scan_columns()
    next(it)
    it.close()
    with fs.walk_ahead():  # also while the next chunk is being walked on the second thread
        it = log.scan_columns(chunk_records=2)
        next(it)
        it.close()
    store = Store.open(ORACLE / "basic-5.3.1/store")
    for cq in store.consume_queues():
        for _ in cq.iter_units():
            break
    for _ in store.timerlog.iter_units():
        break


def test_topic_table_numbers_topics_in_order_of_first_appearance():
    """The extension's `TopicTable` and `walk.TopicTable`: the same numbers, the same names, past the table's
    growth steps (64 slots, 4 KiB of names), for empty, long, prefix-sharing and non-UTF-8 topics."""
    rng = np.random.default_rng(7)
    pool = [b"", b"A", b"A\x00", b"AB", b"\xff\xfe", b"L" * 300] + [f"Topic{i}".encode() for i in range(3000)]
    seq = [pool[i] for i in rng.integers(0, len(pool), 20000).tolist()]
    native, plain = NATIVE.topic_table(), PYTHON.topic_table()
    got = [native.id(t) for t in seq]
    assert got == [plain.id(t) for t in seq]
    order = list(dict.fromkeys(seq))  # each topic once, in order of first appearance
    assert native.names == plain.names == order and len(order) > 2000
    number = {t: i for i, t in enumerate(order)}
    assert got == [number[t] for t in seq]


def test_properties_pairs_follow_string2messageProperties():
    cases = ["", "a\x01b\x02", "a\x01b", "\x01b\x02a\x01\x02k\x01v\x02", "k\x01v\x02k\x01w\x02j\x01x\x02",
             "ab\x02c\x01d\x01e\x02", "\x02\x02x\x01y"]
    for s in cases:
        buf = s.encode()
        rec_offsets = np.zeros(2, np.int32)
        arrays = np.zeros((4, 16), np.int64)
        for k in (NATIVE, PYTHON):
            m = k.property_pairs(fs.as_array(buf), np.array([0]), np.array([len(buf)]), rec_offsets, *arrays)
            kpos, klen, vpos, vlen = arrays
            got = {buf[kpos[i] : kpos[i] + klen[i]].decode(): buf[vpos[i] : vpos[i] + vlen[i]].decode()
                   for i in range(m)}
            assert list(got.items()) == list(parse_properties(s).items()), s
