"""What the broker's dispatch computes from a stored record for its ConsumeQueue unit (spec §3).

Read at `rocketmq-all-5.3.1` and `rocketmq-all-4.9.8` (`CommitLog.checkMessageAndReturnSize`): the same in
both. A delay-level record's tagsCode is its deliver time instead (`rules.schedule.compute_deliver_timestamp`).
"""

from mqtool.formats.javahash import java_string_hash


def tags_string_2_tags_code(tags: str | None) -> int:
    """`MessageExtBrokerInner.tagsString2tagsCode`: `String.hashCode()` of TAGS, the whole string for a
    multi-tag `a||b`; 0 for a record without TAGS (or an empty one)."""
    return java_string_hash(tags) if tags else 0
