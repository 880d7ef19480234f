"""`spark-audit`'s option checks in the library (`mqtool.audit.options`) and through the CLI (exit 2)."""

import pytest
from typer.testing import CliRunner

from mqtool.audit.options import AuditOptionError, check_audit_options
from mqtool.cli.app import app
from mqtool.errors import MqtoolError


def test_conf_settings_split_at_the_first_equals_sign():
    conf = ["spark.executor.memory=2g", "spark.driver.extraJavaOptions=-Da=b"]
    assert check_audit_options(False, "spark://h:7077", conf) == {
        "spark.executor.memory": "2g", "spark.driver.extraJavaOptions": "-Da=b"}
    assert check_audit_options(True, None, []) == {}
    assert check_audit_options(False, None, ["k="]) == {"k": ""}


@pytest.mark.parametrize("local, master, conf, message", [
    (True, "local[1]", [], "use either --local or --master, not both"),
    (True, "local[1]", ["nokey"], "use either --local or --master, not both"),  # checked first
    (False, None, ["a=1", "spark.x", "y"], "--conf takes KEY=VALUE, not 'spark.x'"),
])
def test_option_errors(local, master, conf, message):
    with pytest.raises(AuditOptionError) as e:
        check_audit_options(local, master, conf)
    assert str(e.value) == message
    assert isinstance(e.value, MqtoolError)


@pytest.mark.parametrize("args, message", [
    (["--local", "--master", "local[1]"], "Error: use either --local or --master, not both\n"),
    (["--conf", "spark.x"], "Error: --conf takes KEY=VALUE, not 'spark.x'\n"),
])
def test_cli_exits_2_before_reading_the_store(tmp_path, args, message):
    res = CliRunner().invoke(app, ["spark-audit", str(tmp_path), *args])  # no store there: options come first
    assert res.exit_code == 2
    assert res.output == message
