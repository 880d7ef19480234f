"""DLedger groups: each node's ledger against the most up-to-date one (the oracle's leader and built followers)."""

import json
from pathlib import Path

import jsonschema

from conftest import ORACLE, need_oracle
from mqtool.builder.replica import write_dledger_follower
from mqtool.inspect import load_schema
from mqtool.inspect.replicas import replicas_view
from mqtool.store.fleet import open_fleet

DL = ORACLE / "dledger-5.3.1"


def _conf(path: Path, self_id: str) -> None:
    path.write_text(
        "brokerClusterName=C\nbrokerName=broker-g0\nenableDLegerCommitLog=true\ndLegerGroup=g0\n"
        f"dLegerSelfId={self_id}\ndLegerPeers=n0-127.0.0.1:40911;n1-127.0.0.1:40912;n2-127.0.0.1:40913\n"
        "mappedFileSizeCommitLog=16384\n"
    )


def _fleet(tmp: Path) -> tuple[Path, list[dict]]:
    need_oracle()
    entries = [json.loads(line) for line in (DL / "records.jsonl").read_text().splitlines()]
    fleet = tmp / "fleet"
    fleet.mkdir()
    (fleet / "n0").symlink_to(DL / "store", target_is_directory=True)
    _conf(fleet / "n0.broker.conf", "n0")
    write_dledger_follower(DL / "store", fleet / "n1", "n1", end_index=30, committed_index=29)
    body10 = entries[10]["dledgerPos"] + 48 + 100  # a byte inside entry 10's message
    write_dledger_follower(DL / "store", fleet / "n2", "n2", end_index=41, flips=(body10,))
    _conf(fleet / "n1.broker.conf", "n1")
    _conf(fleet / "n2.broker.conf", "n2")
    return fleet, entries


def test_dledger_nodes_behind_and_differing(tmp_path: Path):
    fleet, entries = _fleet(tmp_path)
    doc = replicas_view(open_fleet(fleet), 0)
    (g,) = doc["groups"]
    assert (g["group"], g["kind"], g["reference"]) == ("g0", "dledger", "broker-g0:n0")
    n0, n1, n2 = g["nodes"]
    # the oracle's README: 42 entries, index 0..41, committedIndex=41, currTerm=0, voteLeader=n0
    assert (n0["begin_index"], n0["end_index"], n0["term"], n0["committed_index"], n0["vote_leader"]) == (
        0,
        41,
        0,
        41,
        "n0",
    )
    assert n0["committed_pos"] == entries[41]["dledgerPos"] + entries[41]["dledgerSize"] == n0["end_pos"]
    assert (n1["end_index"], n1["committed_index"], n1["behind_entries"], n1["differing_entries"]) == (30, 29, 11, 0)
    assert n1["committed_pos"] == entries[29]["dledgerPos"] + entries[29]["dledgerSize"]
    assert (n2["behind_entries"], n2["differing_entries"], n2["differing_indexes"]) == (0, 1, [10])
    lost = n1["only_on_reference"]  # entries 31..41: on n0 only
    assert [m["offset"] for m in lost["messages"]] == [e["physicalOffset"] for e in entries[31:]]
    assert [m["topic"] for m in lost["messages"]] == [e["topic"] for e in entries[31:]]
    assert [m["uniq_key"] for m in lost["messages"]] == [e["properties"].get("UNIQ_KEY") for e in entries[31:]]
    assert n2["only_on_reference"]["records"] == 0
    jsonschema.Draft202012Validator(load_schema("replicas")).validate(json.loads(json.dumps(doc)))
    assert [(f["file"], f["severity"]) for f in doc["findings"]] == [
        ("broker-g0:n1", "warning"),
        ("broker-g0:n2", "error"),
    ]


def test_dledger_text_output(tmp_path: Path):
    from typer.testing import CliRunner

    from mqtool.cli.app import app

    fleet, _ = _fleet(tmp_path)
    r = CliRunner().invoke(app, ["inspect", str(fleet), "replicas"])
    assert r.exit_code == 1  # n2's entry 10 differs: an error
    assert "reference: broker-g0:n0" in r.stdout
    row = next(line for line in r.stdout.splitlines() if line.strip().startswith("broker-g0:n1"))
    entries = [json.loads(line) for line in (DL / "records.jsonl").read_text().splitlines()]
    pos29 = entries[29]["dledgerPos"] + entries[29]["dledgerSize"]
    assert row.split()[1:9] == ["0", "30", "0", "29", str(pos29), "11", "0", "11"]
