"""config/timermetrics and config/transactionMetrics: the values the real 5.3.1 broker of pair_default
wrote (see its README: A = before the restart, B = after 151 s of timer dequeue and transaction checks),
and the fastjson BrowserCompatible details worked out by hand."""

import pytest

from conftest import ORACLE, need_oracle
from mqtool.formats.metrics_json import (
    Metric,
    TopicMetrics,
    dump_topic_metrics,
    parse_timer_metrics,
    parse_transaction_metrics,
)
from mqtool.formats.offsets_json import ConfigFileError, DataVersion


def test_real_timer_metrics_values():
    need_oracle()
    a = parse_timer_metrics((ORACLE / "pair_default/A/config/timermetrics").read_text())
    assert a.data_version == DataVersion(7, 0, 1795376096205)
    assert a.counts == {"OracleTopicA": Metric(3, 1795376096205), "OracleTopicB": Metric(2, 1795376096205)}
    b = parse_timer_metrics((ORACLE / "pair_default/B/config/timermetrics").read_text())
    assert (b.count("OracleTopicA"), b.count("OracleTopicB"), b.count("Nope")) == (1, 0, 0)
    bak = parse_timer_metrics((ORACLE / "pair_default/A/config/timermetrics.bak").read_text())
    assert bak.counts == {} and bak.data_version == DataVersion(0, 0, 1795376092063)


def test_real_transaction_metrics_values():
    need_oracle()
    a = parse_transaction_metrics((ORACLE / "pair_default/A/config/transactionMetrics").read_text())
    b = parse_transaction_metrics((ORACLE / "pair_default/B/config/transactionMetrics").read_text())
    assert a.counts == {"OracleTxTopic": Metric(4, 1795376092652)}
    assert b.counts == {"OracleTxTopic": Metric(0, 1795376132662)} and b.data_version.counter == 12


def test_browser_compatible_escapes_and_big_longs():
    m = TopicMetrics("transactionCount", {"a/é": Metric(1, 1 << 60)}, None)
    text = dump_topic_metrics(m)
    assert text == '{"transactionCount":{"a\\/\\u00E9":{"count":1,"timeStamp":"1152921504606846976"}}}'
    assert parse_transaction_metrics(text) == m  # quoted longs read back as numbers, as fastjson does


def test_bad_metric_says_where():
    with pytest.raises(ConfigFileError) as e:
        parse_timer_metrics('{"timingCount":{"T":{"count":"x"}}}')
    assert "T.count must be an integer" in str(e.value)
