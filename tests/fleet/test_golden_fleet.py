"""Golden files of the fleet views on fixtures/fleet (tests/golden/inspect-fleet*.json).

After an intended change of an output, rewrite them and review the diff:
    MQTOOL_UPDATE_GOLDENS=1 python -m pytest -q tests/fleet/test_golden_fleet.py
"""

import json
import os

import jsonschema
import pytest
from typer.testing import CliRunner

from conftest import FIXTURES, PROJECT
from mqtool.cli.app import app
from mqtool.golden import check_golden, loads
from mqtool.inspect import load_schema

FLEET = FIXTURES / "fleet"
GOLDEN = PROJECT / "tests" / "golden"
NOW = "2026-11-18T12:00:00Z"
UPDATE = os.environ.get("MQTOOL_UPDATE_GOLDENS") == "1"


@pytest.mark.parametrize(
    ("view", "golden", "schema", "code"),
    [
        ("overview", "inspect-fleet.json", "fleet", 1),  # broker-a's slave has a torn tail: an error finding
        ("replicas", "inspect-fleet-replicas.json", "replicas", 0),
    ],
)
def test_fleet_goldens(view, golden, schema, code):
    r = CliRunner().invoke(app, ["inspect", str(FLEET), view, "--json", "--now", NOW], catch_exceptions=False)
    assert r.exit_code == code, r.stderr
    doc = loads(r.stdout, False)
    jsonschema.Draft202012Validator(load_schema(schema)).validate(json.loads(r.stdout))
    result = check_golden(doc, GOLDEN / golden, lines=False, update_golden=UPDATE, paths={"<store>": FLEET})
    assert result.equal, f"{result.message}\n{result.diff}"


def test_fleet_expect_on_the_command_line():
    """--expect compares a fleet view like any view; <store> stands for the fleet directory."""
    args = [
        "inspect",
        str(FLEET),
        "replicas",
        "--json",
        "--now",
        NOW,
        "--expect",
        str(GOLDEN / "inspect-fleet-replicas.json"),
    ]
    r = CliRunner().invoke(app, args, catch_exceptions=False)
    assert r.exit_code == 0, r.stderr
    assert r.stderr == f"{GOLDEN / 'inspect-fleet-replicas.json'}: output equals the golden file\n"
