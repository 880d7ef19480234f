"""`mqtool index build --json` carries version 1 and matches its schema; a second run adds nothing."""

import json
from importlib.resources import files

import jsonschema
from typer.testing import CliRunner

from conftest import FIXTURES
from mqtool.cli.app import app


def test_index_build_json_matches_schema(tmp_path):
    schema = json.loads(files("mqtool").joinpath("schemas", "index-build.json").read_text("utf-8"))
    runner = CliRunner()
    first = runner.invoke(app, ["index", "build", str(FIXTURES / "demo"), "--out", str(tmp_path), "--json"])
    assert first.exit_code == 0, first.output
    doc = json.loads(first.stdout)
    jsonschema.validate(doc, schema)
    # the demo store: 66 records ending at 27307 (fixtures/README.md)
    assert (doc["index"]["records_added"], doc["index"]["indexed_end"], doc["index"]["rebuilt"]) == (66, 27307, True)
    again = json.loads(runner.invoke(app, ["index", "build", str(FIXTURES / "demo"), "--out", str(tmp_path),
                                           "--json"]).stdout)
    jsonschema.validate(again, schema)
    index = again["index"]
    assert (index["records_added"], index["rebuilt"], index["total_records"]) == (0, False, 66)
