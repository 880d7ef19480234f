"""What the overview says about a store's files (issue 27): abort.bak, the queue count of the layout line,
and one line for the configured topics without a queue directory."""

import shutil

from typer.testing import CliRunner

from conftest import FIXTURES, ORACLE, need_oracle
from mqtool.cli.app import app
from mqtool.inspect.overview import overview
from mqtool.store.store import Store

NOW = 1795462444000


def test_abort_bak_is_written_at_every_start():
    """`DefaultMessageStore.createTempFile` (5.3.1) writes the pid into `abort` with `MixAll.string2File`,
    which first copies the file it replaces to abort.bak: empty after a clean stop, so every 5.x store that
    ever started has one (basic-5.3.1's is 0 bytes, and it was shut down cleanly)."""
    need_oracle()
    root = ORACLE / "basic-5.3.1" / "store"
    assert (root / "abort.bak").stat().st_size == 0 and not (root / "abort").exists()
    kinds = {p["path"]: p["kind"] for p in overview(Store.open(root), NOW)["paths"]}
    assert kinds["abort.bak"] == (
        "abort.bak (5.x: written at every broker start, the copy of the abort file it "
        "replaced: empty, or the crashed run's pid when the start followed a crash)"
    )


def test_the_layout_line_counts_batch_consume_queues():
    """fixtures/batchcq: PlainTopic/0 (ConsumeQueue), BatchTopic/0 and /1 (BatchConsumeQueue)."""
    doc = overview(Store.open(FIXTURES / "batchcq"), NOW)
    assert doc["files"]["consumequeue"] == {"topics": 1, "queues": 1, "files": 1}
    assert doc["files"]["batchconsumequeue"] == {"topics": 1, "queues": 2}
    assert doc["files"]["queues_total"] == {"topics": 2, "queues": 3}
    assert sum(len(t["queues"]) for t in doc["topics"]) == 3  # the table below the line
    out = CliRunner().invoke(app, ["inspect", str(FIXTURES / "batchcq"), "--now", str(NOW)]).stdout
    assert "ConsumeQueues        3 queues of 2 topics (2 BatchConsumeQueue)" in out


def test_configured_topics_without_a_queue_directory_are_one_line():
    """retry-dlq-5.3.1/B's topics.json configures 11 topics that never got a message (was 11 lines)."""
    need_oracle()
    doc = overview(Store.open(ORACLE / "retry-dlq-5.3.1" / "B"), NOW)
    lines = [(f["file"], f["topic"], f["message"]) for f in doc["findings"] if f["check"] == "store.config"]
    assert lines == [
        (
            "config/topics.json",
            None,
            "11 topic(s) configured, no queue directory (nothing dispatched "
            "yet): BenchmarkTest, OFFSET_MOVED_EVENT, OracleCluster, OracleCluster_REPLY_TOPIC, "
            "RMQ_SYS_TRANS_HALF_TOPIC, RMQ_SYS_TRANS_OP_HALF_TOPIC, SELF_TEST_TOPIC, TBW102, broker-a, "
            "rmq_sys_REVIVE_LOG_OracleCluster, rmq_sys_SYNC_BROKER_MEMBER_broker-a",
        )
    ]
    rows = {r["topic"]: r for r in doc["topic_config"]["topics"]}
    assert rows["TBW102"]["problems"] == ["configured, no queue directory (nothing dispatched yet)"]


def test_a_cut_queue_file_in_a_store_with_one_queue_needs_broker_conf(tmp_path):
    """With one ConsumeQueue file its length is all the store shows; broker.conf's size decides then."""
    from mqtool.formats.broker_conf import parse_broker_conf

    store = shutil.copytree(FIXTURES / "batchcq", tmp_path / "b")
    f = store / "consumequeue" / "PlainTopic" / "0" / "00000000000000000000"
    f.write_bytes(f.read_bytes()[:100])
    assert [x for x in Store.open(store).file_findings() if x.severity == "error"] == []
    conf = parse_broker_conf((FIXTURES / "batchcq.broker.conf").read_text())
    assert [(x.file, x.offset, x.severity) for x in Store.open(store, conf).file_findings()] == [
        ("consumequeue/PlainTopic/0/00000000000000000000", 100, "error")
    ]
