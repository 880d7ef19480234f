"""A store converted from normal mode to DLedger, built from basic-5.3.1 (spec §12)."""

import json
import struct

from conftest import ORACLE, need_oracle
from mqtool.formats.commitlog import BLANK_MAGIC_CODE
from mqtool.formats.dledger import build_checkpoint, dledger_entry, index_unit


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
