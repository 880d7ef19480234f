"""Controller mode: the epoch file, `findConsistentPoint`, and where a returning old master truncates."""

import json
import shutil
from pathlib import Path

import jsonschema
import pytest
from fleetkit import CONF, CONFIG, T0, build_master
from typer.testing import CliRunner

from mqtool.builder.replica import ReplicaShape, write_broker_identity, write_epoch_file, write_replica
from mqtool.builder.writer import StoreWriter
from mqtool.cli.app import app
from mqtool.formats.epochfile import EpochFileError, build_epoch_file, parse_epoch_file
from mqtool.inspect import load_schema
from mqtool.inspect.replicas import replicas_view
from mqtool.rules.epoch import LONG_MAX, EpochEntry, find_consistent_point, init_entries, truncate_offset
from mqtool.store.epoch import read_epoch_entries
from mqtool.store.findings import Findings
from mqtool.store.fleet import open_fleet


def test_epoch_file_text():
    """CheckpointFile#write: count, crc32 of the entry lines (with their line ends), `epoch-startOffset`."""
    text = build_epoch_file([(1, 0), (2, 12345)])
    lines = text.split("\n")
    assert lines[0] == "2" and lines[2:] == ["1-0", "2-12345", ""]
    import zlib

    assert int(lines[1]) == zlib.crc32(b"1-0\n2-12345\n") & 0x7FFFFFFF
    assert parse_epoch_file(text) == [(1, 0), (2, 12345)]
    assert parse_epoch_file("1\n0\n5-7\n") == [(5, 7)]  # crc 0 is not checked
    with pytest.raises(EpochFileError, match="crc32 not match"):
        parse_epoch_file("1\n1\n5-7\n")
    with pytest.raises(EpochFileError, match="expect 2 entries, only found 1"):
        parse_epoch_file("2\n0\n5-7\nnot an entry\n")


def test_find_consistent_point():
    """EpochFileCache#findConsistentPoint: the newest epoch both hold with the same start; the smaller end."""
    old = init_entries([(1, 0)])
    assert old == [EpochEntry(1, 0, LONG_MAX)]
    new = init_entries([(1, 0), (2, 500)])
    assert new == [EpochEntry(1, 0, 500), EpochEntry(2, 500, LONG_MAX)]
    assert find_consistent_point(old, new) == 500
    assert find_consistent_point(init_entries([(3, 9)]), new) == -1
    # doTruncate: each side's last entry ends at its max offset
    assert truncate_offset([(1, 0), (2, 500)], 800, [(1, 0), (2, 500), (3, 700)], 900) == 700
    assert truncate_offset([], 800, [(1, 0)], 900) is None  # a new replica: nothing to truncate


def test_epoch_file_bak_fallback(tmp_path: Path):
    write_epoch_file(tmp_path, [(1, 0)])
    write_epoch_file(tmp_path, [(1, 0), (2, 64)])
    assert (tmp_path / "epochFileCheckpoint.bak").read_text() == build_epoch_file([(1, 0)])
    (tmp_path / "epochFileCheckpoint").write_text("2\n99\n1-0\n2-64\n")  # bad crc
    f = Findings()
    assert read_epoch_entries(tmp_path, f) == [(1, 0)]
    assert [(x.file, x.severity) for x in f] == [("epochFileCheckpoint", "warning")]
    assert read_epoch_entries(tmp_path / "none", Findings()) is None


def test_returning_old_master_truncates_what_it_wrote_after_the_failover(tmp_path: Path):
    """broker-c: the master (epoch 1) wrote 90 records; its slave held 60 when the controller made it master
    (epoch 2 from there) and it wrote 5 more. The old master, back as a slave, truncates to the end of
    epoch 1 on the new master: its records 60..89 are dropped."""
    fleet = tmp_path / "fleet"
    recs = build_master(fleet / "old")
    split = recs[59].physical_offset + recs[59].total_size
    write_replica(fleet / "old", tmp_path / "copy", CONFIG, ReplicaShape(end=split))
    w = StoreWriter.extend(tmp_path / "copy", fleet / "new", CONFIG)
    for i in range(5):
        w.append_message("TopicA", 0, b"y" * 60, [("KEYS", f"N{i}")], store_timestamp=T0 + 5000 + i)
    w.write_checkpoint()
    w.close()
    shutil.rmtree(tmp_path / "copy")
    write_epoch_file(fleet / "old", [(1, 0)])
    write_epoch_file(fleet / "new", [(1, 0), (2, split)])
    for name, bid in (("old", 1), ("new", 2)):
        (fleet / f"{name}.broker.conf").write_text(CONF + "brokerName=broker-c\nenableControllerMode=true\n")
        write_broker_identity(fleet / name, "FleetCluster", "broker-c", bid)
    doc = replicas_view(open_fleet(fleet), 0)
    (g,) = doc["groups"]
    assert (g["kind"], g["master"], g["master_reason"]) == (
        "controller",
        "broker-c:2",
        "controller mode: the latest epoch (2)",
    )
    (pair,) = g["pairs"]
    ep = pair["epochs"]
    assert (ep["slave"], ep["master"], ep["truncate_offset"]) == ([[1, 0]], [[1, 0], [2, split]], split)
    end = recs[-1].physical_offset + recs[-1].total_size
    assert ep["truncated_bytes"] == end - split
    assert [m["keys"] for m in ep["truncated_records"]["messages"]] == [[f"K{i:04d}"] for i in range(60, 90)]
    # the records at the split differ in the low byte of their big-endian TOTALSIZE (the three high bytes alike)
    assert pair["common"]["first_difference"] == split + 3 == 11633
    # promoting the old master instead would lose what the new one wrote in epoch 2
    assert [m["keys"] for m in pair["promotion_loses"]["messages"]] == [[f"N{i}"] for i in range(5)]
    assert pair["behind"]["bytes"] == 0 and pair["ahead"]["bytes"] > 0
    assert (
        "broker-c:1 vs broker-c:2: following this master, the store truncates its CommitLog at 11630: 30 record(s) "
        "it wrote are dropped" in [f["message"] for f in doc["findings"]]
    )
    schema = load_schema("replicas")
    jsonschema.Draft202012Validator(schema).validate(json.loads(json.dumps(doc)))
    r = CliRunner().invoke(app, ["inspect", str(fleet), "replicas"])
    assert r.exit_code == 1  # the CommitLogs differ from the split on
    assert f"at {split}: drops 30 record(s)" in r.stdout
