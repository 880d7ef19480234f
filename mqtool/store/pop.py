"""POP state from the CommitLog (spec §15): checkpoints and acks on the revive topic, paired.

A checkpoint (tag ck) and an ack (ack / bAck) are timer messages: first stored on the timer topic
(REAL_TOPIC = `rmq_sys_REVIVE_LOG_<cluster>`, stage "timer"), then delivered into the revive topic
(stage "revive"). Both copies carry the same UNIQ_KEY; the delivered one is kept. Acks are paired with
their checkpoint as `PopReviveService.consumeReviveMessage` does (the merge key: topic, group, queue,
start offset, pop time, broker name; `indexOfAck` for the bit). A checkpoint message not acked is
"invisible" until its revive time, then "due"; once the revive service's progress (the
`CID_RMQ_SYS_REVIVE_GROUP` offset on the revive queue) has passed the checkpoint it is "revived".
Bodies that do not parse become findings.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from mqtool.formats.message import MessageRecord, RecordError
from mqtool.formats.names import (
    ACK_TAG,
    BATCH_ACK_TAG,
    CK_TAG,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    RETRY_GROUP_TOPIC_PREFIX,
    REVIVE_GROUP,
    REVIVE_TOPIC,
    TIMER_TOPIC,
)
from mqtool.formats.pop import AckMsg, PopBodyError, PopCheckPoint, parse_ack, parse_checkpoint
from mqtool.rules.pop import build_pop_retry_topic
from mqtool.store.findings import Findings

CHECK = "pop.records"


@dataclass(frozen=True)
class ReviveRecord:
    """Where a ck / ack record lies: its CommitLog offset, the revive queue, and the stage it is in."""

    tag: str
    physical_offset: int
    revive_topic: str
    revive_queue_id: int
    revive_queue_offset: int | None  # None while it waits in the timer
    stage: str  # "timer" or "revive"
    deliver_ms: int | None
    uniq_key: str | None
    file: str = ""


@dataclass
class PopCheck:
    """One checkpoint and what its acks say; `status` is set by `PopState.classify`."""

    checkpoint: PopCheckPoint
    record: ReviveRecord
    acked: set[int] = field(default_factory=set)  # queue offsets acked (bitmap or ack records)
    acks: list[ReviveRecord] = field(default_factory=list)
    status: str = "invisible"

    @property
    def offsets(self) -> list[int]:
        """The queue offsets this checkpoint popped."""
        return [self.checkpoint.ack_offset_by_index(i) for i in range(max(self.checkpoint.num, 0))
                if not self.checkpoint.queue_offset_diff or i < len(self.checkpoint.queue_offset_diff)]

    @property
    def unacked(self) -> list[int]:
        return [o for o in self.offsets if o not in self.acked]


@dataclass
class PopState:
    """Every checkpoint with its acks, and acks without a checkpoint."""

    checks: list[PopCheck]
    orphan_acks: list[tuple[AckMsg, ReviveRecord]]

    def classify(self, now_ms: int, revive_offsets: dict[tuple[str, int], int] | None = None) -> None:
        """Set each checkpoint's status at `now_ms` (the store's own time, never the wall clock).

        acked: every message acked; revived: not all acked and the revive service's offset on its revive
        queue is past the checkpoint; due: revive time reached; invisible: otherwise."""
        for c in self.checks:
            progress = (revive_offsets or {}).get((c.record.revive_topic, c.record.revive_queue_id))
            if not c.unacked:
                c.status = "acked"
            elif (progress is not None and c.record.revive_queue_offset is not None
                  and c.record.revive_queue_offset <= progress):  # mergeAndRevive commits the last ck's own offset
                c.status = "revived"
            elif c.checkpoint.revive_time <= now_ms:
                c.status = "due"
            else:
                c.status = "invisible"

    def by_group(self) -> list[dict]:
        """Per (group, topic): messages popped, acked, invisible, due, revived; the next revive time."""
        rows: dict[tuple[str, str], dict] = {}
        for c in self.checks:
            key = (c.checkpoint.cid or "", c.checkpoint.topic or "")
            r = rows.setdefault(key, {"group": key[0], "topic": key[1], "checkpoints": 0, "popped": 0, "acked": 0,
                                      "invisible": 0, "due": 0, "revived": 0, "next_revive_time": None})
            r["checkpoints"] += 1
            r["popped"] += len(c.offsets)
            r["acked"] += len(c.offsets) - len(c.unacked)
            if c.status in ("invisible", "due", "revived"):
                r[c.status] += len(c.unacked)
            if c.status == "invisible":
                t = c.checkpoint.revive_time
                r["next_revive_time"] = t if r["next_revive_time"] is None else min(r["next_revive_time"], t)
        return [rows[k] for k in sorted(rows)]


def revive_record(rec: MessageRecord) -> ReviveRecord | None:
    """The ck / ack / bAck record of a revive topic, or the timer copy of one; None for any other record."""
    props = rec.properties
    tag = props.get(PROPERTY_TAGS)
    if tag not in (CK_TAG, ACK_TAG, BATCH_ACK_TAG):
        return None
    if rec.topic.startswith(REVIVE_TOPIC):
        topic, qid, qoff, stage = rec.topic, rec.queue_id, rec.queue_offset, "revive"
    elif rec.topic == TIMER_TOPIC and props.get(PROPERTY_REAL_TOPIC, "").startswith(REVIVE_TOPIC):
        try:
            qid = int(props.get(PROPERTY_REAL_QUEUE_ID, "0"))
        except ValueError:
            qid = 0
        topic, qoff, stage = props[PROPERTY_REAL_TOPIC], None, "timer"
    else:
        return None
    deliver = props.get(PROPERTY_TIMER_DELIVER_MS) or props.get(PROPERTY_TIMER_OUT_MS)
    return ReviveRecord(tag, rec.physical_offset, topic, qid, qoff, stage,
                        int(deliver) if deliver and deliver.lstrip("-").isdigit() else None,
                        props.get(PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX), rec.file)


def read_pop(records: Iterable[MessageRecord], findings: Findings) -> PopState:
    """Collect and pair the checkpoints and acks among `records` (a CommitLog walk, in offset order)."""
    found: dict[tuple, tuple[ReviveRecord, MessageRecord]] = {}
    for rec in records:
        rr = revive_record(rec)
        if rr is None:
            continue
        key = (rr.tag, rr.uniq_key) if rr.uniq_key else (rr.tag, rr.physical_offset)
        if key not in found or rr.stage == "revive":  # the delivered copy wins over the timer copy
            found[key] = (rr, rec)
    checks: dict[tuple, PopCheck] = {}
    acks: list[tuple[AckMsg, ReviveRecord]] = []
    for rr, rec in found.values():
        try:
            if rr.tag == CK_TAG:
                ck = parse_checkpoint(rec.body)
                if ck.topic is None or ck.cid is None:  # consumeReviveMessage skips these
                    raise PopBodyError("checkpoint without topic or group")
                c = PopCheck(ck, rr, {ck.ack_offset_by_index(i) for i in range(max(ck.num, 0))
                                      if ck.bit_map >> i & 1 and (not ck.queue_offset_diff
                                                                  or i < len(ck.queue_offset_diff))})
                checks[ck.merge_key()] = c
            else:
                acks.append((parse_ack(rec.body, batch=rr.tag == BATCH_ACK_TAG), rr))
        except PopBodyError as e:
            findings.add(rec.file, rec.physical_offset, CHECK, "warning", f"{rr.tag} record unreadable: {e}",
                         rr.revive_topic, rr.revive_queue_id)
    orphans = []
    for ack, rr in acks:
        c = checks.get(ack.merge_key())
        if c is None:
            orphans.append((ack, rr))
            continue
        c.acks.append(rr)
        for off in ack.ack_offsets:
            if c.checkpoint.index_of_ack(off) > -1:
                c.acked.add(off)
            else:
                findings.add(rr.file, rr.physical_offset, CHECK, "warning", f"ack of offset {off} is not one of its "
                             f"checkpoint's (invalid ack index)", rr.revive_topic, rr.revive_queue_id)
    ordered = sorted(checks.values(), key=lambda c: c.record.physical_offset)
    return PopState(ordered, orphans)


def revive_offsets_from(consumer_offsets) -> dict[tuple[str, int], int]:
    """(revive topic, queue id) -> the revive service's progress, from a `ConsumerOffsets` (None: none)."""
    out: dict[tuple[str, int], int] = {}
    if consumer_offsets is None:
        return out
    suffix = "@" + REVIVE_GROUP
    for key, table in consumer_offsets.offset_table.items():
        if key.endswith(suffix) and key.startswith(REVIVE_TOPIC):
            out.update({(key[: -len(suffix)], qid): off for qid, off in table.items()})
    return out


def read_store_pop(store, findings: Findings, now_ms: int | None = None) -> PopState:
    """The POP state of an open `Store`: a CommitLog walk (its integrity findings stay with the CommitLog
    views), pairing, and the status at `now_ms` (default: the store's last activity). Besides the revive
    progress, a checkpoint counts as revived when every unacked message has a copy (same UNIQ_KEY) in its
    pop retry topic stored at or after the revive time (what `reviveRetry` writes)."""
    retries: dict[tuple[str, str], list[int]] = {}

    def walk():
        for rec in store.commitlog.iter_records(verify_crc=False, findings=Findings()):
            if rec.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and rec.uniq_key:
                retries.setdefault((rec.topic, rec.uniq_key), []).append(rec.store_timestamp)
            yield rec

    state = read_pop(walk(), findings)
    state.classify(store.last_activity_ms() if now_ms is None else now_ms,
                   revive_offsets_from(store.config_files.consumer_offsets))
    for c in state.checks:
        if c.status == "due" and all(_revived(store, c, off, retries) for off in c.unacked):
            c.status = "revived"
    return state


def _revived(store, c: PopCheck, offset: int, retries: dict[tuple[str, str], list[int]]) -> bool:
    ck = c.checkpoint
    cq = store.consume_queue(ck.topic, ck.queue_id)
    unit = cq.unit(offset) if cq is not None else None
    if unit is None:
        return False
    try:
        uniq = store.commitlog.read(unit.commitlog_offset).uniq_key
    except RecordError:
        return False
    topics = {ck.topic} if ck.topic.startswith(RETRY_GROUP_TOPIC_PREFIX) else {
        build_pop_retry_topic(ck.topic, ck.cid, v2) for v2 in (False, True)}
    return any(t >= ck.revive_time for topic in topics for t in retries.get((topic, uniq), ()))


def has_pop(store) -> bool:
    """Detection: a revive topic among the store's ConsumeQueues."""
    return any(t.startswith(REVIVE_TOPIC) for t, _q in store.queue_ids)
