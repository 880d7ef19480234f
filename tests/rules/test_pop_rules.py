"""`PopReviveService.reviveRetry`'s topic and map (rocketmq-all-5.3.1), with values worked out by hand."""

from mqtool.rules.pop import revive_retry_properties, revive_retry_topic


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
