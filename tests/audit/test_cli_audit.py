"""`mqtool spark-audit --local`: exit codes, report file, options (no Spark needed)."""

import json

import pytest
from audit import audit_stores
from audit.audit_stores import BASIC, body_position, patch
from typer.testing import CliRunner

from conftest import need_oracle
from mqtool.cli.app import app

runner = CliRunner()
pytestmark = pytest.mark.oracle
basic_copy = audit_stores.basic_copy


def test_clean_store_exits_0_and_writes_the_report(tmp_path):
    need_oracle()
    out = tmp_path / "r.json"
    res = runner.invoke(app, ["spark-audit", str(BASIC), "--local", "--json", "--out", str(out)])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc == json.loads(out.read_text())
    assert doc["version"] == 1 and doc["engine"]["master"] == "local (no Spark)"
    assert set(doc) == {"version", "store", "engine", "summary", "findings"}


def test_report_matches_schema():
    need_oracle()
    import jsonschema

    from mqtool.audit.runner import run_local

    schema = json.loads(open("mqtool/schemas/audit-report.json").read())
    jsonschema.validate(run_local(BASIC), schema)


def test_fail_on_warning():
    need_oracle()
    res = runner.invoke(app, ["spark-audit", str(BASIC), "--local", "--fail-on", "warning"])
    assert res.exit_code == 1  # the overdue level-1 message is a warning
    assert "schedule" in res.stdout


def test_crc_error_exits_1(basic_copy):
    patch(basic_copy / "commitlog" / "00000000000000000000", body_position(basic_copy, 0), b"\xff")
    res = runner.invoke(app, ["spark-audit", str(basic_copy), "--local", "--json"])
    assert res.exit_code == 1
    assert [f["offset"] for f in json.loads(res.stdout)["findings"] if f["severity"] == "error"] == [0]


@pytest.mark.parametrize("args, message", [
    (["--fail-on", "info"], "Invalid value for '--fail-on'"),  # a Typer enum: click's usage error
    (["--local", "--master", "local[1]"], "Error: use either --local or --master, not both"),
])
def test_usage_errors_exit_2(args, message):
    need_oracle()
    res = runner.invoke(app, ["spark-audit", str(BASIC), *args])
    assert res.exit_code == 2
    assert message in res.output


def test_not_a_store_exits_2(tmp_path):
    res = runner.invoke(app, ["spark-audit", str(tmp_path), "--local"])
    assert res.exit_code == 2
    assert "not a RocketMQ store" in res.output


def test_local_parquet(tmp_path):
    need_oracle()
    import pyarrow.parquet as pq

    res = runner.invoke(app, ["spark-audit", str(BASIC), "--local", "--json", "--parquet", str(tmp_path / "pq")])
    assert res.exit_code == 0
    t = pq.read_table(tmp_path / "pq" / "commitlog")
    assert t.num_rows == 115 and t.column("physical_offset").to_pylist()[:2] == [0, 251]
    assert pq.read_table(tmp_path / "pq" / "consumequeue").num_rows == 115
    assert pq.read_table(tmp_path / "pq" / "timerlog").num_rows == 6


@pytest.mark.parametrize("flag", ["--help"])
def test_help(flag):
    res = runner.invoke(app, ["spark-audit", flag])
    assert res.exit_code == 0 and "--master" in res.output


def test_config_is_read_with_load_broker_conf(tmp_path):
    """--config: broker.conf through `load_broker_conf`; its delay levels reach the schedule check."""
    need_oracle()
    from audit.audit_stores import PAIR_B

    conf = tmp_path / "broker.conf"
    conf.write_text("messageDelayLevel=1s 5s\n")
    res = runner.invoke(app, ["spark-audit", str(PAIR_B), "--local", "--json", "--config", str(conf)])
    assert res.exit_code == 1  # units of levels 3..18 now break the tagsCode rule of level 2
    findings = json.loads(res.stdout)["findings"]
    assert sorted(f["queue_id"] for f in findings if "not configured" in f["message"]) == [2, 4, 5, 17]
    assert "+ level 2 delay 5000 ms" in next(f["message"] for f in findings if "tagsCode" in f["message"])
    conf.write_text("transactionCheckMax=many\n")
    res = runner.invoke(app, ["spark-audit", str(PAIR_B), "--local", "--config", str(conf)])
    assert res.exit_code == 2 and "Error:" in res.output and "transactionCheckMax" in res.output


def test_missing_store_or_config_is_one_error_line(tmp_path):
    for args in ([str(tmp_path / "nope"), "--local"], [str(tmp_path), "--local", "--config", str(tmp_path / "x")]):
        res = runner.invoke(app, ["spark-audit", *args])
        assert res.exit_code == 2, res.output
        assert res.stderr.startswith("Error: ") and res.stderr.count("\n") == 1, res.stderr
