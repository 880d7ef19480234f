"""`PopReviveService.reviveRetry`'s topic and map (rocketmq-all-5.3.1), with values worked out by hand."""

from mqtool.rules.pop import process_consume_result, revive_retry_properties, revive_retry_topic


def test_revive_retry_topic_keeps_a_retry_topic_and_builds_the_pop_retry_topic_otherwise():
    assert revive_retry_topic("TopicA", "GID") == "%RETRY%GID_TopicA"
    assert revive_retry_topic("TopicA", "GID", v2=True) == "%RETRY%GID+TopicA"
    assert revive_retry_topic("%RETRY%GID", "GID") == "%RETRY%GID"  # popped from the group's retry topic


def test_revive_retry_properties_put_tags_first_and_the_first_pop_time_once():
    props = {"KEYS": "k", "TAGS": "t"}
    first = revive_retry_properties(props, 0, 1000)
    assert list(first.items()) == [("TAGS", "t"), ("KEYS", "k"), ("1ST_POP_TIME", "1000")]
    again = revive_retry_properties(first, 1, 2000)  # a second revive keeps the first pop time
    assert again["1ST_POP_TIME"] == "1000"
    assert list(revive_retry_properties({"KEYS": "k"}, 3, 5)) == ["KEYS", "1ST_POP_TIME"]  # no TAGS, absent: set
    assert props == {"KEYS": "k", "TAGS": "t"}  # the message's own map is not changed


def test_a_failed_pop_message_waits_by_its_reconsume_times_then_by_its_age():
    # popDelayLevel = 10 s, 30 s, 1 min, ...: below the limit the level is reconsumeTimes
    assert process_consume_result(0, 16, 0) == 10_000
    assert process_consume_result(2, 16, 0) == 60_000
    # at the limit, by the age: 35 s reached the 30 s level, the next one (1 min) is taken
    assert process_consume_result(16, 16, 35_000) == 60_000
    assert process_consume_result(16, 16, 5_000) == 0  # younger than 10 s: nothing sent
    assert process_consume_result(16, 16, 2 * 7200 * 1000 + 1) == -1  # older than twice the last level: acked
