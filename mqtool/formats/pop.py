"""POP checkpoint and ack bodies on the revive topic (spec §15; rocketmq-all-5.3.1 `store/pop/PopCheckPoint`,
`AckMsg`, `BatchAckMsg`, written by `PopMessageProcessor.buildCkMsg` / `AckMessageProcessor.appendAck`).

Bodies are fastjson `JSON.toJSONString` of the bean: fields by their `@JSONField` names in sorted order,
null fields left out, and PopCheckPoint's getter-only `reviveTime` (popTime + invisibleTime) included.
The record's tag says which bean: `ck` (PopCheckPoint), `ack` (AckMsg), `bAck` (BatchAckMsg: `aol`).
Parsing is lenient, as `JSON.parseObject`: unknown keys ignored, AckMsg's alternate long names accepted,
missing numbers read as Java's 0. This is the one definition of the bodies: `rules/pop.py` and the
simulator build them here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from mqtool.errors import MqtoolError


class PopBodyError(MqtoolError, ValueError):
    """A revive-topic body that is not the JSON object of its tag."""


@dataclass(frozen=True)
class PopCheckPoint:
    """`PopCheckPoint`: `num` messages popped from topic/queue at `start_offset` + each of `queue_offset_diff`."""

    topic: str | None
    cid: str | None  # the consumer group
    queue_id: int
    start_offset: int
    pop_time: int
    invisible_time: int
    bit_map: int  # bit i set: message i already acked when the checkpoint was written
    num: int
    revive_offset: int
    queue_offset_diff: list[int] = field(default_factory=list)
    broker_name: str | None = None
    re_put_times: str | None = None

    @property
    def revive_time(self) -> int:
        """`getReviveTime`: popTime + invisibleTime."""
        return self.pop_time + self.invisible_time

    def index_of_ack(self, ack_offset: int) -> int:
        """`indexOfAck`: the bit an ack of `ack_offset` sets, -1 when it is not one of this checkpoint's."""
        if ack_offset < self.start_offset:
            return -1
        if not self.queue_offset_diff:  # old version of checkpoint
            return ack_offset - self.start_offset if ack_offset - self.start_offset < self.num else -1
        diff = ack_offset - self.start_offset
        return self.queue_offset_diff.index(diff) if diff in self.queue_offset_diff else -1

    def ack_offset_by_index(self, index: int) -> int:
        """`ackOffsetByIndex`: the queue offset of message `index`."""
        if not self.queue_offset_diff:
            return self.start_offset + index
        return self.start_offset + self.queue_offset_diff[index]

    def merge_key(self) -> tuple:
        """`mergeAndRevive`'s map key (Java concatenates the parts as one string)."""
        return (self.topic, self.cid, self.queue_id, self.start_offset, self.pop_time, self.broker_name)


@dataclass(frozen=True)
class AckMsg:
    """`AckMsg` (tag ack) or `BatchAckMsg` (tag bAck: `ack_offsets` from `aol`)."""

    topic: str | None
    consumer_group: str | None
    queue_id: int
    start_offset: int
    pop_time: int
    broker_name: str | None
    ack_offsets: list[int]
    batch: bool = False

    def merge_key(self) -> tuple:
        return (self.topic, self.consumer_group, self.queue_id, self.start_offset, self.pop_time, self.broker_name)


# ----------------------------------------------------------------------------- building
def _json(obj: dict) -> bytes:
    return json.dumps(dict(sorted(obj.items())), separators=(",", ":"), ensure_ascii=False).encode()


def ck_body(topic: str, group: str, queue_id: int, start_offset: int, diffs: list[int], pop_time: int,
            invisible_time: int, broker_name: str, bit_map: int = 0, revive_offset: int = 0) -> bytes:
    """`JSON.toJSONString(PopCheckPoint)` as `appendCheckPoint` fills it."""
    return _json({"so": start_offset, "pt": pop_time, "it": invisible_time, "bm": bit_map, "n": len(diffs),
                  "q": queue_id, "t": topic, "c": group, "ro": revive_offset, "d": diffs, "bn": broker_name,
                  "reviveTime": pop_time + invisible_time})


def ack_body(topic: str, group: str, queue_id: int, start_offset: int, ack_offset: int, pop_time: int,
             broker_name: str) -> bytes:
    """`JSON.toJSONString(AckMsg)` of a single ack."""
    return _json({"ao": ack_offset, "so": start_offset, "c": group, "t": topic, "q": queue_id, "pt": pop_time,
                  "bn": broker_name})


def batch_ack_body(topic: str, group: str, queue_id: int, start_offset: int, ack_offsets: list[int], pop_time: int,
                   broker_name: str) -> bytes:
    """`JSON.toJSONString(BatchAckMsg)`: AckMsg's fields (ackOffset left 0) and `aol`."""
    return _json({"ao": 0, "so": start_offset, "c": group, "t": topic, "q": queue_id, "pt": pop_time,
                  "bn": broker_name, "aol": ack_offsets})


# ----------------------------------------------------------------------------- parsing
def _object(body: bytes) -> dict:
    try:
        obj = json.loads(body.decode("utf-8", "replace"))
    except ValueError as e:
        raise PopBodyError(f"body is not JSON: {e}") from None
    if not isinstance(obj, dict):
        raise PopBodyError("body is not a JSON object")
    return obj


def _get(obj: dict, *names: str):
    return next((obj[n] for n in names if n in obj and obj[n] is not None), None)


def _long(obj: dict, *names: str) -> int:
    v = _get(obj, *names)
    if v is None:
        return 0
    try:
        return int(v)
    except (TypeError, ValueError):
        raise PopBodyError(f"{names[0]} is not a number: {v!r}") from None


def _str(obj: dict, *names: str) -> str | None:
    v = _get(obj, *names)
    return None if v is None else str(v)


def _longs(obj: dict, *names: str) -> list[int]:
    v = _get(obj, *names)
    if v is None:
        return []
    if not isinstance(v, list):
        raise PopBodyError(f"{names[0]} is not a list: {v!r}")
    try:
        return [int(x) for x in v]
    except (TypeError, ValueError):
        raise PopBodyError(f"{names[0]} holds a non-number") from None


def parse_checkpoint(body: bytes) -> PopCheckPoint:
    """`JSON.parseObject(raw, PopCheckPoint.class)`."""
    o = _object(body)
    return PopCheckPoint(
        topic=_str(o, "t"), cid=_str(o, "c"), queue_id=_long(o, "q"), start_offset=_long(o, "so"),
        pop_time=_long(o, "pt"), invisible_time=_long(o, "it"), bit_map=_long(o, "bm"), num=_long(o, "n"),
        revive_offset=_long(o, "ro"), queue_offset_diff=_longs(o, "d"), broker_name=_str(o, "bn"),
        re_put_times=_str(o, "rp"))


def parse_ack(body: bytes, batch: bool = False) -> AckMsg:
    """`JSON.parseObject(raw, AckMsg.class)` or, with `batch`, `BatchAckMsg.class` (alternate names too)."""
    o = _object(body)
    offsets = _longs(o, "aol", "ackOffsetList") if batch else [_long(o, "ao", "ackOffset")]
    return AckMsg(
        topic=_str(o, "t", "topic"), consumer_group=_str(o, "c", "consumerGroup"), queue_id=_long(o, "q", "queueId"),
        start_offset=_long(o, "so", "startOffset"), pop_time=_long(o, "pt", "popTime"),
        broker_name=_str(o, "bn", "brokerName"), ack_offsets=offsets, batch=batch)
