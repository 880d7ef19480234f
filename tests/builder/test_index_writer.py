"""The builder writes the broker's IndexFiles: the demo store's index/ against an independent chain walk."""

from __future__ import annotations

import struct
from pathlib import Path

from indexkit import walk_chain

from mqtool.builder.demo import T0, demo_config
from mqtool.builder.writer import StoreWriter, read_records
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.names import PROPERTY_KEYS, PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX
from mqtool.formats.sysflag import TRANSACTION_MASK, TRANSACTION_ROLLBACK

DEMO = Path(__file__).resolve().parents[2] / "fixtures" / "demo"


def _keys(rec) -> list[str]:
    """What buildIndex puts for a record (written again here, not taken from rules/index)."""
    if rec.sys_flag & TRANSACTION_MASK == TRANSACTION_ROLLBACK:
        return []
    p = rec.properties
    out = [p[PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX]] if PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX in p else []
    return out + [k for k in p.get(PROPERTY_KEYS, "").split(" ") if k]


def test_demo_index_header_and_every_key_found():
    files = sorted((DEMO / "index").iterdir())
    assert [f.name for f in files] == ["20260921141320010"]  # T0 + 10 ms in UTC: the first record's time
    data = files[0].read_bytes()
    assert len(data) == 40 + 100 * 4 + 400 * 20
    begin, end, begin_phy, end_phy, _slots, count = struct.unpack(">qqqqii", data[:40])
    recs = read_records(DEMO / "commitlog")
    indexed = [r for r in recs if _keys(r)]
    assert begin == T0 + 10 == recs[0].store_timestamp
    assert (begin_phy, end_phy, end) == (0, indexed[-1].physical_offset, indexed[-1].store_timestamp)
    assert count - 1 == sum(len(_keys(r)) for r in recs) == 141
    for r in recs:
        for k in _keys(r):
            assert r.physical_offset in walk_chain(data, 100, f"{r.topic}#{k}"), (r.topic, k)


def test_no_geometry_no_index(tmp_path):
    with StoreWriter(tmp_path / "s", BrokerConfig()) as w:
        w.append_message("T", 0, b"x", [(PROPERTY_KEYS, "k1")], store_timestamp=T0)
    assert not (tmp_path / "s" / "index").exists()


def test_extend_continues_the_last_index_file(tmp_path):
    base = (DEMO / "index" / "20260921141320010").read_bytes()
    w = StoreWriter.extend(DEMO, tmp_path / "s", demo_config())
    rec = w.append_message("DemoTopicA", 0, b"x", [(PROPERTY_KEYS, "late-1 late-2")], store_timestamp=T0 + 30_000)
    w.close()
    files = sorted((tmp_path / "s" / "index").iterdir())
    assert [f.name for f in files] == ["20260921141320010"]
    data = files[0].read_bytes()
    assert struct.unpack(">i", data[36:40])[0] == struct.unpack(">i", base[36:40])[0] + 2
    assert struct.unpack(">q", data[24:32])[0] == rec.physical_offset
    assert walk_chain(data, 100, "DemoTopicA#late-2") == [rec.physical_offset]
    # the old entries are untouched
    assert data[440 + 20:440 + 142 * 20] == base[440 + 20:440 + 142 * 20]
