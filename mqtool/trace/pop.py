"""A POP message's pops and acks as trace stages (spec §15), read from the store's checkpoint and ack records.

A pop leaves a checkpoint (tag ck: topic, queue, start offset + `d`, popTime, invisibleTime) and each ack an
ack record (ack offset, the checkpoint's popTime), first parked on the timer topic and then delivered into
`rmq_sys_REVIVE_LOG_<cluster>` (`PopMessageProcessor.buildCkMsg`, `AckMessageProcessor.appendAck`). They carry
their own UNIQ_KEYs, so a trace finds them through the consume queues of those topics (a unit's tagsCode is
the hash of its tag: no CommitLog walk) and pairs them with `store.pop.read_pop`, as the revive service does.
"""

from __future__ import annotations

import weakref

import numpy as np

from mqtool.formats.javahash import java_string_hash
from mqtool.formats.message import MessageRecord, RecordError
from mqtool.formats.names import ACK_TAG, BATCH_ACK_TAG, CK_TAG, REVIVE_TOPIC, TIMER_TOPIC
from mqtool.formats.pop import PopBodyError, parse_ack
from mqtool.store.findings import Findings
from mqtool.store.pop import PopCheck, PopState, has_pop, read_pop, revive_offsets_from
from mqtool.times import format_time
from mqtool.trace.model import Stage

_TAG_CODES = {java_string_hash(t) for t in (CK_TAG, ACK_TAG, BATCH_ACK_TAG)}
_STATES: dict[int, tuple[weakref.ref, PopState | None]] = {}  # id(store) -> (the store, its state)


def _ck_ack_offsets(cq) -> list[int]:
    """CommitLog offsets of a queue's units tagged ck / ack / bAck (numpy over a file queue's columns)."""
    if not hasattr(cq, "scan_columns"):  # a RocksDB queue
        return [u.commitlog_offset for u in cq.iter_units() if u.tags_code in _TAG_CODES]
    out: list[int] = []
    codes = np.array(sorted(_TAG_CODES), dtype=np.int64)
    for _first, units in cq.scan_columns():
        hit = np.isin(units["tags_code"].astype(np.int64), codes)
        out += units["commitlog_offset"][hit].astype(np.int64).tolist()
        del units, hit  # the view must be gone before the file's mapping closes
    return out


def _revive_records(store) -> list[MessageRecord]:
    """Every ck / ack record the consume queues of the revive topics and the timer topic point at."""
    out: dict[int, MessageRecord] = {}
    for topic, qid in store.queue_ids:
        if not (topic.startswith(REVIVE_TOPIC) or topic == TIMER_TOPIC):
            continue
        cq = store.consume_queue(topic, qid)
        for off in _ck_ack_offsets(cq) if cq is not None else ():
            if off not in out:
                try:
                    out[off] = store.commitlog.read(off)
                except RecordError:
                    continue  # a unit past the CommitLog's end: the store's own checks report it
    return [out[k] for k in sorted(out)]


def pop_state(store) -> PopState | None:
    """The store's checkpoints with their acks (once per store), None when it has no revive topic."""
    held = _STATES.get(id(store))
    if held is None or held[0]() is not store:
        recs = _revive_records(store)  # a checkpoint may still wait in the timer before any revive queue exists
        state = read_pop(recs, Findings()) if recs or has_pop(store) else None
        if state is not None:  # as `inspect` says: invisible, due, revived (the revive group's progress) or acked
            state.classify(store.last_activity_ms(), revive_offsets_from(store.config_files.consumer_offsets))
        held = (weakref.ref(store), state)
        _STATES[id(store)] = held
    return held[1]


def _ack_time(store, c: PopCheck, offset: int) -> int | None:
    """When the ack of `offset` was written (the ack record's born time), None when no ack record says so."""
    for rr in c.acks:
        try:
            rec = store.commitlog.read(rr.physical_offset)
            if offset in parse_ack(rec.body, batch=rr.tag == BATCH_ACK_TAG).ack_offsets:
                return rec.born_timestamp
        except (RecordError, PopBodyError):
            continue
    return None


def pop_stages(store, rec: MessageRecord) -> tuple[list[Stage], set[str]]:
    """`popped`, then `acked` or (not yet revived) `not_consumed`, for every checkpoint that popped `rec` from
    its queue, in pop order; and the groups that popped it (their committed offset says nothing about an ack)."""
    state = pop_state(store)
    if state is None:
        return [], set()
    out, groups = [], set()
    for c in state.checks:
        ck = c.checkpoint
        if (ck.topic, ck.queue_id) != (rec.topic, rec.queue_id) or rec.queue_offset not in c.offsets:
            continue
        groups.add(ck.cid)
        where = f"{c.record.revive_topic}/{c.record.revive_queue_id}"
        out.append(
            Stage.at(
                ck.pop_time,
                "popped",
                rec,
                f"popped by consumer group {ck.cid}, invisible until "
                f"{format_time(ck.revive_time)} (checkpoint in revive queue {where})",
            )
        )
        if rec.queue_offset in c.acked:
            out.append(
                Stage.at(
                    _ack_time(store, c, rec.queue_offset),
                    "acked",
                    rec,
                    f"acked by consumer group {ck.cid}: it will not be revived",
                )
            )
        elif c.status in ("invisible", "due"):
            out.append(
                Stage.at(
                    ck.revive_time,
                    "not_consumed",
                    rec,
                    f"consumer group {ck.cid}: not acked; "
                    f"due for a revive into its pop retry topic at {format_time(ck.revive_time)}",
                )
            )
    return out, groups
