"""POP bodies (spec §15): the fastjson JSON of PopCheckPoint / AckMsg / BatchAckMsg, built and parsed."""

import pytest

from mqtool.formats.pop import (
    PopBodyError,
    ack_body,
    batch_ack_body,
    ck_body,
    parse_ack,
    parse_checkpoint,
)
from mqtool.rules import pop as pop_rules


def test_checkpoint_body_is_fastjson_sorted_with_revive_time():
    body = ck_body("T", "G", 2, 100, [0, 3], 1000, 60000, "b1", bit_map=1, revive_offset=5)
    assert body == (b'{"bm":1,"bn":"b1","c":"G","d":[0,3],"it":60000,"n":2,"pt":1000,"q":2,"reviveTime":61000,'
                    b'"ro":5,"so":100,"t":"T"}')
    ck = parse_checkpoint(body)
    assert (ck.topic, ck.cid, ck.queue_id, ck.start_offset, ck.num, ck.bit_map, ck.revive_time) == (
        "T", "G", 2, 100, 2, 1, 61000)
    assert [ck.ack_offset_by_index(i) for i in range(2)] == [100, 103]
    assert [ck.index_of_ack(o) for o in (99, 100, 101, 103)] == [-1, 0, -1, 1]
    assert not hasattr(pop_rules, "ck_body") and not hasattr(pop_rules, "ack_body")  # one definition


def test_old_checkpoint_without_diffs():
    ck = parse_checkpoint(b'{"so":10,"n":3,"t":"T","c":"G","pt":1,"it":2,"rp":"1"}')
    assert [ck.index_of_ack(o) for o in (10, 12, 13)] == [0, 2, -1]
    assert ck.ack_offset_by_index(2) == 12 and ck.re_put_times == "1" and ck.broker_name is None


def test_acks_short_and_alternate_names_and_batch():
    a = parse_ack(ack_body("T", "G", 1, 100, 103, 1000, "b1"))
    assert (a.ack_offsets, a.merge_key()) == ([103], ("T", "G", 1, 100, 1000, "b1"))
    assert parse_checkpoint(ck_body("T", "G", 1, 100, [3], 1000, 5, "b1")).merge_key() == a.merge_key()
    long_names = parse_ack(b'{"ackOffset":7,"startOffset":5,"consumerGroup":"G","topic":"T","queueId":0,'
                           b'"popTime":9,"brokerName":"b"}')
    assert (long_names.ack_offsets, long_names.consumer_group, long_names.pop_time) == ([7], "G", 9)
    b = parse_ack(batch_ack_body("T", "G", 0, 5, [5, 6, 8], 9, "b"), batch=True)
    assert b.ack_offsets == [5, 6, 8] and b.batch


@pytest.mark.parametrize("body", [b"not json", b"[1]", b'{"so":"x"}', b'{"d":3}', b'{"d":["a"]}'])
def test_bad_bodies_raise_pop_body_error(body):
    with pytest.raises(PopBodyError):
        parse_checkpoint(body)
