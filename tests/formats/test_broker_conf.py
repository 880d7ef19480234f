"""broker.conf: Java properties syntax, the oracle pairs' settings, defaults, overrides, delay levels and
the timer roll window."""

from pathlib import Path

import pytest

from mqtool.formats.broker_conf import (
    BrokerConfig,
    load_broker_conf,
    parse_broker_conf,
    parse_properties,
)
from mqtool.formats.offsets_json import ConfigFileError

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
DEFAULT_LEVELS_MS = [
    1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000,
    360000, 420000, 480000, 540000, 600000, 1200000, 1800000, 3600000, 7200000,
]  # fmt: skip


def oracle_conf(pair: str) -> Path:
    path = SHARED / "oracle" / pair / "broker.conf"
    if not path.is_file():
        pytest.skip(f"{path} is absent: the oracle broker.conf is not checked")
    return path


@pytest.mark.oracle
@pytest.mark.parametrize("pair", ["pair_default", "pair-4.9"])
def test_oracle_broker_conf_values(pair: str) -> None:
    c = load_broker_conf(oracle_conf(pair))
    assert (c.transaction_check_max, c.transaction_timeout, c.transaction_check_interval) == (2, 10000, 15000)
    assert (c.mapped_file_size_commitlog, c.mapped_file_size_consume_queue) == (65536, 1280)
    assert c.enable_schedule_async_deliver is False
    assert c.delay_levels_ms() == DEFAULT_LEVELS_MS
    assert c.raw["brokerName"] == "broker-a" and c.raw["maxIndexNum"] == "2000"
    assert c.store_path_root_dir is None and c.file_reserved_time == 72


@pytest.mark.oracle
def test_oracle_5x_timer_settings_and_4x_defaults() -> None:
    five = load_broker_conf(oracle_conf("pair_default"))
    assert (five.mapped_file_size_timer_log, five.timer_precision_ms, five.timer_wheel_enable) == (
        65536,
        1000,
        True,
    )
    assert five.transaction_op_batch_interval == 3000
    four = load_broker_conf(oracle_conf("pair-4.9"))
    assert four.mapped_file_size_timer_log == 100 * 1024 * 1024  # absent: default
    assert four.raw["listenPort"] == "40911"
    assert (four.listen_port, four.broker_name) == (40911, "broker-a")  # the consumers' store host and name


def test_defaults_when_absent() -> None:
    c = parse_broker_conf("# nothing here\n")
    assert c == BrokerConfig()
    assert c.raw == {}
    assert (c.timer_precision_ms, c.timer_roll_window_slot, c.timer_max_delay_sec) == (1000, 172800, 259200)
    assert (c.transaction_timeout, c.transaction_check_max, c.transaction_check_interval) == (6000, 15, 30000)
    assert (c.transaction_op_batch_interval, c.file_reserved_time) == (3000, 72)
    assert (c.mapped_file_size_commitlog, c.mapped_file_size_consume_queue) == (1073741824, 6000000)
    assert (c.mapped_file_size_timer_log, c.flush_delay_offset_interval) == (104857600, 10000)
    assert (c.enable_schedule_async_deliver, c.schedule_async_deliver_max_pending_limit) == (False, 2000)
    assert (c.max_message_size, c.store_path_root_dir, c.timer_wheel_enable) == (4194304, None, True)
    assert BrokerConfig.for_version("4.9").transaction_check_interval == 60000


def test_consumer_and_pop_settings_defaults_and_typed() -> None:
    """5.3.1's BrokerConfig: flushConsumerOffsetInterval 5 s, reviveQueueNum 8, reviveInterval 1 s,
    reviveScanTime 10 s, reviveMaxSlow 3, popFromRetryProbability 20 (brokerName/brokerIP1: fixed here)."""
    c = BrokerConfig()
    assert (c.flush_consumer_offset_interval, c.revive_queue_num, c.revive_interval) == (5000, 8, 1000)
    assert (c.revive_scan_time, c.revive_max_slow, c.pop_from_retry_probability) == (10000, 3, 20)
    assert (c.broker_name, c.broker_cluster_name) == ("broker-a", "DefaultCluster")
    assert (c.broker_ip1, c.listen_port) == ("", 10911)
    assert c.enable_retry_topic_v2 is False
    c = parse_broker_conf("reviveQueueNum=2\nenableRetryTopicV2=TRUE\nbrokerIP1=10.0.0.7\nbrokerClusterName=c1\n")
    assert (c.revive_queue_num, c.enable_retry_topic_v2) == (2, True)  # Boolean.parseBoolean ignores case
    assert (c.broker_ip1, c.broker_cluster_name) == ("10.0.0.7", "c1")
    with pytest.raises(ConfigFileError, match='reviveInterval = "1s" is not an integer'):
        parse_broker_conf("reviveInterval=1s\n")


def test_properties_syntax() -> None:
    text = (
        "# comment = ignored\n"
        "   ! also a comment\n"
        "\n"
        "a=1\n"
        "  b : two  \n"
        "c three words\n"
        "d\t=\t\n"
        "e = x\\\n"
        "     y\\\\\n"
        "f=\\u0041\\t\\z\n"
        "key\\ with\\ space = v\r\n"
        "a=last wins\r"
        "g"
    )
    assert parse_properties(text) == {
        "a": "last wins",
        "b": "two",
        "c": "three words",
        "d": "",
        "e": "xy\\",
        "f": "A\tz",
        "key with space": "v",
        "g": "",
    }


def test_settings_with_spaces_colons_and_booleans() -> None:
    c = parse_broker_conf(
        "timerPrecisionMs : 500 \n storePathRootDir = /data/store \ntimerWheelEnable TRUE\n"
        "enableScheduleAsyncDeliver=yes\ntransactionTimeOut=+7000\n"
    )
    assert (c.timer_precision_ms, c.store_path_root_dir, c.transaction_timeout) == (500, "/data/store", 7000)
    assert c.timer_wheel_enable is True  # Boolean.parseBoolean ignores case
    assert c.enable_schedule_async_deliver is False  # ... and reads anything else as false


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("timerPrecisionMs=abc", 'broker.conf: timerPrecisionMs = "abc" is not an integer'),
        ("transactionCheckMax=1.5", 'broker.conf: transactionCheckMax = "1.5" is not an integer'),
        ("mappedFileSizeCommitLog=4294967296", "does not fit in a Java int"),
        ("messageDelayLevel=1s \\uZZ", "malformed \\uxxxx escape at line 1"),
    ],
)
def test_bad_values_raise(line: str, message: str) -> None:
    with pytest.raises(ConfigFileError) as info:
        parse_broker_conf(line)
    assert message in str(info.value)


def test_load_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "my-broker.conf"
    path.write_bytes(b"transactionTimeOut=ten\n")
    with pytest.raises(ConfigFileError, match=r'^my-broker.conf: transactionTimeOut = "ten" is not an integer$'):
        load_broker_conf(path)
    with pytest.raises(ConfigFileError, match=r"absent.conf: cannot read") as e:
        load_broker_conf(tmp_path / "absent.conf")
    assert str(e.value).startswith(str(tmp_path))  # the path as given, so the user can find it


def test_load_reads_latin1_like_java(tmp_path: Path) -> None:
    path = tmp_path / "broker.conf"
    path.write_bytes("storePathRootDir=/d/\u00e9\n".encode("latin-1"))
    assert load_broker_conf(path).store_path_root_dir == "/d/\u00e9"


def test_with_overrides_takes_java_names() -> None:
    base = parse_broker_conf("transactionCheckMax=2\n")
    c = base.with_overrides(
        {"transactionCheckMax": 5, "timerWheelEnable": False, "timerPrecisionMs": "100", "someOther": 1}
    )
    assert (c.transaction_check_max, c.timer_wheel_enable, c.timer_precision_ms) == (5, False, 100)
    assert c.raw == {"transactionCheckMax": "5", "timerWheelEnable": "false", "timerPrecisionMs": "100",
                     "someOther": "1"}  # fmt: skip
    assert base.transaction_check_max == 2  # frozen: a new object
    with pytest.raises(ConfigFileError, match='override: timerRollWindowSlot = "x" is not an integer'):
        base.with_overrides({"timerRollWindowSlot": "x"})


def test_delay_levels_default_and_custom() -> None:
    assert BrokerConfig().delay_levels_ms() == DEFAULT_LEVELS_MS
    assert len(DEFAULT_LEVELS_MS) == 18
    custom = BrokerConfig(message_delay_level="1s 2m 3h 1d ")
    assert custom.delay_levels_ms() == [1000, 120000, 10800000, 86400000]


@pytest.mark.parametrize(
    ("levels", "message"),
    [
        ("1s 5x", 'level 2 "5x" has no valid unit'),
        ("1s 5S", 'level 2 "5S" has no valid unit'),
        ("1s  5s", 'level 2 "" has no valid unit'),
        ("1s ms", 'level 2 "ms" is not a number'),
        ("", "messageDelayLevel is empty"),
    ],
)
def test_bad_delay_levels_raise(levels: str, message: str) -> None:
    with pytest.raises(ConfigFileError, match=message):
        BrokerConfig(message_delay_level=levels).delay_levels_ms()


@pytest.mark.parametrize(
    ("setting", "slots"),
    [(172800, 172800), (2, 2), (1, 604740), (-5, 604740), (604740, 604740), (604741, 604740)],
)
def test_timer_roll_window_slots(setting: int, slots: int) -> None:
    assert BrokerConfig(timer_roll_window_slot=setting).timer_roll_window_slots() == slots
