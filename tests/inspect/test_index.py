"""The index view, key lookup and single-file dump on the oracle stores, checked against the raw
bytes, an independent chain walk over RocketMQ's own record decoding, and the schema."""

import json
import shutil
import struct

import jsonschema
import pytest
from indexkit import CASES, walk_chain

from conftest import ORACLE, need_oracle
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.inspect import load_schema
from mqtool.inspect.index import index_file_dump, index_files_view, index_lookup
from mqtool.store.store import Store

# the stores mqtool can read records of (DLedger's CommitLog is the next issue's)
STORE_CASES = [c for c in CASES if c.name in ("basic-5.3.1", "pair_default/A", "pair_default/B", "pair-4.9/A",
                                              "pair-4.9/B", "batchcq-5.3.1", "compaction-5.3.1")]
HEADER = ("begin_timestamp", "end_timestamp", "begin_phy_offset", "end_phy_offset", "hash_slot_count", "index_count")


@pytest.fixture(scope="module")
def validator():
    schema = load_schema("index")
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def valid(validator, doc: dict) -> dict:
    doc = json.loads(json.dumps(doc))  # exactly what --json prints
    validator.validate(doc)
    return doc


def conf_of(case) -> BrokerConfig:
    return BrokerConfig(raw={"maxHashSlotNum": str(case.hash_slot_num), "maxIndexNum": str(case.index_num)})


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_files_view_headers_are_the_bytes(case, validator):
    need_oracle()
    doc = valid(validator, index_files_view(Store.open(case.store, conf_of(case))))
    assert [r["file"] for r in doc["files"]] == [f"index/{p.name}" for p in case.index_files()]
    for row, p in zip(doc["files"], case.index_files(), strict=True):
        assert tuple(row[k] for k in HEADER) == struct.unpack(">qqqqii", p.read_bytes()[:40])
        assert row["geometry_from"] == "broker.conf" and row["findings"] == []
    assert doc["findings"] == []
    assert doc["totals"]["entries"] == sum(r["index_count"] - 1 for r in doc["files"])


@pytest.mark.parametrize("case", STORE_CASES, ids=[c.name for c in STORE_CASES])
def test_every_key_lookup_agrees_with_the_brokers_chain(case, validator):
    """For every key a record carries: walk the chain with struct, keep offsets whose record (as
    RocketMQ decoded it) really carries the key in that topic; mqtool must give exactly those."""
    need_oracle()
    store = Store.open(case.store, conf_of(case))
    records = {r["offset"]: r for r in case.record_lines()}
    datas = [p.read_bytes() for p in case.index_files()]

    def carries(r, topic, key):
        return r["topic"] == topic and key in [r["properties"].get("UNIQ_KEY"),
                                               *r["properties"].get("KEYS", "").split(" ")]

    keys = sorted({(r["topic"], k) for r in records.values()
                   for k in [r["properties"].get("UNIQ_KEY"), *r["properties"].get("KEYS", "").split(" ")] if k})
    for topic, key in keys:
        walked = [phy for d in reversed(datas) for phy in walk_chain(d, case.hash_slot_num, f"{topic}#{key}")]
        want = list(dict.fromkeys(p for p in walked if p in records and carries(records[p], topic, key)))
        doc = index_lookup(store, topic, key)
        got = [m["physical_offset"] for m in doc["matches"]]
        assert got == want and want, (topic, key)
        assert doc["hash_matches"] == len(walked)
        assert {r["physical_offset"] for r in doc["rejected"]} == {p for p in walked if p not in want}
    valid(validator, doc)


def test_lookup_details_on_pair_default(validator):
    need_oracle()
    case = next(c for c in CASES if c.name == "pair_default/B")
    store = Store.open(case.store, conf_of(case))
    doc = valid(validator, index_lookup(store, "OracleTopicA", "N1"))
    (m,) = doc["matches"]
    assert (m["physical_offset"], m["topic"], m["queue_id"], m["matched_by"], m["timestamp"]) == (
        0, "OracleTopicA", 0, "KEYS", 1795376092574)  # B.commitlog.jsonl line 1
    assert doc["broker_phy_offsets"] == [0]
    assert (doc["index_last_update_timestamp"], doc["index_last_update_phyoffset"]) == (1795376216182, 16939)
    none = valid(validator, index_lookup(store, "OracleTopicA", "no-such-key"))
    assert none["matches"] == [] and none["files"] == ["index/20261122193452593"]
    # the window after the store's last entry: the file's range does not overlap, nothing walked
    late = index_lookup(store, "OracleTopicA", "N1", begin=1795376216183, end=1795376300000)
    assert late["matches"] == [] and late["hash_matches"] == 0


def test_lookup_limit_and_newest_first():
    need_oracle()
    case = next(c for c in CASES if c.name == "compaction-5.3.1")
    store = Store.open(case.store, conf_of(case))
    # index.json: queryOffset("CompactT", "k1") == [7844, 6451, 4950, 2934, 1284, 0]
    assert [m["physical_offset"] for m in index_lookup(store, "CompactT", "k1")["matches"]] == [
        7844, 6451, 4950, 2934, 1284, 0]
    assert [m["physical_offset"] for m in index_lookup(store, "CompactT", "k1", limit=2)["matches"]] == [7844, 6451]


def test_dump_of_one_file(validator):
    need_oracle()
    p = ORACLE / "pair_default/B/index/20261122193452593"
    doc = valid(validator, index_file_dump(p, limit=5))
    data = p.read_bytes()
    assert tuple(doc["header"][k] for k in HEADER) == struct.unpack(">qqqqii", data[:40])
    assert doc["entry_count"] == 96 and len(doc["entries"]) == 5 and doc["slot_count"] == 69
    for e in doc["entries"]:
        kh, phy, diff, prev = struct.unpack_from(">iqii", data, 40 + 2000 + e["entry"] * 20)
        assert (e["key_hash"], e["phy_offset"], e["time_diff"], e["prev_index"]) == (kh, phy, diff, prev)
    assert len(index_file_dump(p)["entries"]) == 96


def test_damaged_index_gives_findings_not_exceptions(tmp_path, validator):
    need_oracle()
    root = tmp_path / "s"
    shutil.copytree(ORACLE / "pair_default/B", root, ignore=shutil.ignore_patterns("timerwheel.gz"))
    for p in root.rglob("*"):
        p.chmod(0o755 if p.is_dir() else 0o644)
    (f,) = (root / "index").iterdir()
    data = bytearray(f.read_bytes())
    data[40 + 2000 + 10 * 20 + 16:40 + 2000 + 10 * 20 + 20] = struct.pack(">i", 10)  # entry 10 -> itself
    f.write_bytes(bytes(data[:3000]))  # and torn
    conf = BrokerConfig(raw={"maxHashSlotNum": "500", "maxIndexNum": "2000"})
    store = Store.open(root, conf)
    doc = valid(validator, index_files_view(store))
    messages = [x["message"] for x in doc["files"][0]["findings"]]
    assert any(m.startswith("torn or short file: 3000 of 42040") for m in messages)
    assert "entry 10: prevIndex 10 is not an older entry (the chain can loop)" in messages
    for r in STORE_CASES[2].record_lines()[:10]:
        valid(validator, index_lookup(store, r["topic"], r["properties"]["UNIQ_KEY"]))
    valid(validator, index_file_dump(f, conf))
    shutil.rmtree(root / "index")
    doc = valid(validator, index_files_view(store))
    assert doc["files"] == [] and doc["findings"][0]["severity"] == "info"
