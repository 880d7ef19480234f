"""Views over a RocksDB-mode store (spec §14): the queue view reads a RocksDB consume queue, consumer
offsets and topics come from the RocksDB config when the JSON copy is absent or older.

No store written by a real RocksDB-mode broker exists here: the oracle store basic-5.3.1 (written by
RocketMQ 5.3.1) is copied with its file ConsumeQueues replaced by a database `builder/rocksdb.py` writes
from the same units, so the RocksDB queue view must give exactly the lines the file-based view gives.
"""

import json
import shutil

import jsonschema
import pytest
from click.testing import Result
from typer.testing import CliRunner

from mqtool.builder.rocksdb import write_kv_config
from mqtool.cli.app import app
from mqtool.formats.config_json import TopicConfig, Topics, dump_topics
from mqtool.formats.offsets_json import ConsumerOffsets, DataVersion, dump_consumer_offsets
from mqtool.formats.rocksdb_config import dump_offset_value
from mqtool.inspect import load_schema
from mqtool.inspect.overview import overview
from mqtool.inspect.queue import iter_queue, queue_summary
from mqtool.store.store import Store

NOW = 1795462444000


def _inspect(*args) -> Result:
    """`mqtool inspect ARGS` run in this process (the CLI a user runs, without a new interpreter's start)."""
    return CliRunner().invoke(app, ["inspect", *map(str, args)])


def _cli_queue(root, topic: str, qid: int) -> list[dict]:
    r = _inspect(root, "queue", "--topic", topic, "--queue-id", qid, "--json")
    assert r.exit_code == 0, r.output
    return [json.loads(line) for line in r.stdout.splitlines()]


def test_rocksdb_queue_lines_equal_the_consumequeue_lines(rocksdb_stores):
    plain, rocks = rocksdb_stores
    s = Store.open(rocks)
    assert s.layouts.rocksdb_consume_queue == ("consumequeue",)
    assert ("TopicB", 1) in s.rocksdb_queue_offsets
    assert s.queue_ids == list(s.rocksdb_queue_offsets) == Store.open(plain).queue_ids
    # TopicB/1 rolled its ConsumeQueue file (README): the lines go across the file boundary
    for topic, qid in (("TopicB", 1), ("TopicA", 3), ("SCHEDULE_TOPIC_XXXX", 17)):
        want = _cli_queue(plain, topic, qid)
        assert want and _cli_queue(rocks, topic, qid) == want
        assert all(r["match"] for r in want)
    tail = list(iter_queue(s, "TopicB", 1, start=60, limit=3))
    assert len(tail) == 3 and tail == list(iter_queue(Store.open(plain), "TopicB", 1, 60, 3))
    assert queue_summary(s, "TopicB", 1) == {
        "min_offset": 0,
        "max_offset": queue_summary(Store.open(plain), "TopicB", 1)["max_offset"],
        "files": 0,
        "rocksdb": True,
    }


def test_unknown_rocksdb_queue_names_the_topics(rocksdb_stores):
    _plain, rocks = rocksdb_stores
    r = _inspect(rocks, "queue", "--topic", "Nope", "--queue-id", 0, "--json")
    assert r.exit_code == 2 and "TopicB" in r.stderr


def _offsets(counter: int, offset: int) -> ConsumerOffsets:
    return ConsumerOffsets({"TopicA@g1": {0: offset}}, DataVersion(counter, 0, 1700000000000))


def _kv_offsets(root, counter: int, offset: int) -> None:
    dv = json.dumps({"counter": counter, "stateVersion": 0, "timestamp": 1700000000000}).encode()
    write_kv_config(root / "config" / "consumerOffsets", {"TopicA@g1": dump_offset_value({0: offset})}, dv)


@pytest.mark.parametrize("json_counter, expect", [(None, ("rocksdb", 7)), (3, ("rocksdb", 7)), (9, ("json", 5))])
def test_consumer_offsets_from_the_newer_copy(tmp_path, json_counter, expect):
    root = tmp_path / "store"
    (root / "config").mkdir(parents=True)
    _kv_offsets(root, 5, 7)
    if json_counter is not None:
        (root / "config" / "consumerOffset.json").write_text(dump_consumer_offsets(_offsets(json_counter, 5)))
    cf = Store.open(root).config_files
    assert (cf.consumer_offsets_source, cf.consumer_offsets.offset_table["TopicA@g1"][0]) == expect


def test_topics_from_rocksdb_when_topics_json_is_absent(tmp_path):
    root = tmp_path / "store"
    (root / "config").mkdir(parents=True)
    write_kv_config(
        root / "config" / "topics",
        {"TopicA": b'{"order":false,"perm":6,"readQueueNums":8,"topicName":"TopicA","writeQueueNums":8}'},
    )
    s = Store.open(root)
    assert s.config_files.topics_file == "config/topics"
    assert s.config_files.topics.topic_config_table["TopicA"].read_queue_nums == 8
    (root / "config" / "topics.json").write_text(dump_topics(Topics({"TopicA": TopicConfig("TopicA", 2, 2)})))
    s = Store.open(root)  # neither copy has a data version counter: the managers' merge keeps RocksDB
    assert s.config_files.topics_file == "config/topics"


def test_overview_lists_rocksdb_queues_and_config_sources(rocksdb_stores, tmp_path):
    plain, rocks = rocksdb_stores
    root = tmp_path / "store"
    shutil.copytree(rocks, root)
    _kv_offsets(root, 5, 7)
    doc = overview(Store.open(root), NOW)
    jsonschema.Draft202012Validator(load_schema("overview")).validate(json.loads(json.dumps(doc)))
    want = overview(Store.open(plain), NOW)
    queues = {(t["topic"], q["queue_id"]): q for t in doc["topics"] for q in t["queues"]}
    for t in want["topics"]:
        for q in t["queues"]:
            got = queues[(t["topic"], q["queue_id"])]
            assert (got["records"], got["cq_min_offset"], got["cq_max_offset"], got["rocksdb"]) == (
                q["records"],
                q["cq_min_offset"],
                q["cq_max_offset"],
                True,
            )
    assert doc["config_sources"] == {"consumer_offsets": "rocksdb", "topics": None, "topics_file": None}
    assert [f["message"] for f in doc["findings"] if "not yet read" in f["message"]] == []
    read = {p["path"]: p["read"] for p in doc["paths"]}
    assert read["consumequeue"] is True and read["config/consumerOffsets"] is True
    text = _inspect(root, "--now", NOW).stdout
    assert "consumer offsets from" in text and "RocksDB" in text
