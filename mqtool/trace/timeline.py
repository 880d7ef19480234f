"""From the records of one message to its timeline (stages) and its verdict.

The records are walked in CommitLog order, which is the order the broker wrote them, and each one
becomes one or more stages by what it is (its `role`):

| role | record | stages |
|---|---|---|
| `stored` | the message in an ordinary topic | `stored`, then per consumer group `consumed` / `not_consumed` |
| `delay` | `SCHEDULE_TOPIC_XXXX` queue level-1 (§4.2) | `stored`, `parked` (level, due = ConsumeQueue tagsCode) |
| `retry_delay` | the same, REAL_TOPIC `%RETRY%group` (§4.10) | `retry_scheduled` |
| `timer` | `rmq_sys_wheel_timer` (§6.1) | `stored`, `parked` (wheel slot and TimerLog unit, §6.4/6.5) |
| `roll` | a timer re-put with a roll count (§6.8) | `rolled` |
| `cancel` | a record whose `TIMER_DEL_UNIQKEY` names it (§6.7) | `cancel_requested`, `cancelled` (slot read) |
| `half` / `half_copy` | `RMQ_SYS_TRANS_HALF_TOPIC` (§7.2, §7.5) | `parked`; `put_back` per check (or immunity re-put) |
| `commit` / `rollback` | transaction type COMMIT / ROLLBACK (§7.3) | `committed` (+ consumers) / `rolled_back` |
| `op` | op record naming a half queue offset (§7.4) | `op`, or `rolled_back` when no COMMIT record exists |
| `discard` | `RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC` | `discarded` |
| `delivered` | the re-put in REAL_TOPIC by the schedule or timer service | `delivered` (+ consumers) |
| `retry` / `dlq` | `%RETRY%group` / `%DLQ%group` | `retry` / `dead_lettered` (+ consumers) |

"Now" is `as_of`: the store's last sign of life (see `store_as_of`), never the wall clock, so a
copied store explains the same way tomorrow. Times in verdict texts are UTC ISO-8601.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from mqtool.formats import names
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.message import MessageRecord
from mqtool.formats.timerlog import MAGIC_DELETE, MAGIC_ROLL, TIMERLOG_UNIT_SIZE
from mqtool.rules.schedule import compute_deliver_timestamp, level_delay_ms, queue_id_2_delay_level
from mqtool.rules.timer import cancels_in_slot, dequeue_ms, roll_times, was_dequeued, was_rolled
from mqtool.rules.transaction import PUT_BACK as IMMUNE_PUT_BACK
from mqtool.rules.transaction import check_immunity_time, check_times_of, immunity, need_discard
from mqtool.store.delaylevels import delay_levels_in_effect
from mqtool.store.store import Store
from mqtool.store.timer import TimerLogUnit
from mqtool.times import format_duration, format_time
from mqtool.trace.find import Family, del_target, op_offsets, upper
from mqtool.trace.model import Stage, TracedRecord, Verdict
from mqtool.trace.pop import pop_stages


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def store_as_of(store: Store, records: list[MessageRecord] = ()) -> int:
    """The store's last sign of life (`Store.last_activity_ms`, also simulate's default start) or a
    newer record at hand. Waiting times ("in 1h58m") are counted from here."""
    return max([store.last_activity_ms(), *(r.store_timestamp for r in records)])


def timer_units(store: Store, offsets: set[int]) -> dict[int, list[TimerLogUnit]]:
    """TimerLog units whose offsetPy is one of `offsets`, in TimerLog order.

    The store's TimerLog walk decides which units exist (`TimerLog.scan_columns`: numpy views over
    each file, up to its filler or unwritten bytes); only the matching rows become objects.
    """
    out: dict[int, list[TimerLogUnit]] = {}
    if not offsets or store.timerlog is None:
        return out
    want = np.array(sorted(offsets), dtype=np.int64)
    for start, units in store.timerlog.scan_columns():
        hit = np.flatnonzero(np.isin(units["offset_py"].astype(np.int64), want)).tolist()
        rows = [tuple(int(v) for v in units[i].tolist()) for i in hit]
        del units  # the view must be gone before the file's mapping closes
        for i, row in zip(hit, rows, strict=True):
            unit = TimerLogUnit(start + i * TIMERLOG_UNIT_SIZE, *row)
            out.setdefault(unit.offset_py, []).append(unit)
    return out


def consumers(store: Store, rec: MessageRecord) -> list[tuple[str, int | None, bool]]:
    """(group, committed offset or None, consumed?) for every group with offsets on the record's topic."""
    co = store.config_files.consumer_offsets
    if co is None:
        return []
    out = []
    for key, table in co.offset_table.items():
        topic, _, group = key.partition("@")
        if topic != rec.topic or group == names.CID_SYS_RMQ_TRANS:
            continue
        off = table.get(rec.queue_id)
        out.append((group, off, off is not None and off > rec.queue_offset))
    return sorted(out)


def _n(count: int, noun: str) -> str:
    """`1 check`, `2 checks`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _fmt(ms: int | None) -> str:
    return format_time(ms)


def _place(rec: MessageRecord) -> str:
    return f"{rec.topic}/{rec.queue_id}@{rec.queue_offset}"


def _real(rec: MessageRecord) -> str:
    p = rec.properties
    return f"{p.get(names.PROPERTY_REAL_TOPIC)}/{p.get(names.PROPERTY_REAL_QUEUE_ID)}"


@dataclass
class _Park:
    kind: str  # delay | timer | retry_delay
    rec: MessageRecord
    due: int | None  # None: a delay level missing from messageDelayLevel (never delivered)
    level: int | None = None
    slot: int | None = None  # timer: the wheel slot it sits in now
    rolls: bool = False


@dataclass
class _State:
    """What the walk has seen so far; the verdict is made from it at the end."""

    state: str = "unknown"
    delivered: MessageRecord | None = None
    park: _Park | None = None
    cancel: MessageRecord | None = None
    cancel_slot: int | None = None
    half: MessageRecord | None = None
    copies: list[MessageRecord] = field(default_factory=list)
    checks: int = 0
    immunity_puts: int = 0
    commit: MessageRecord | None = None
    rollback: MessageRecord | None = None
    discard: MessageRecord | None = None
    dlq: MessageRecord | None = None
    cancel_target: str | None = None


# ----------------------------------------------------------------- the stages' texts


def _level_text(level: int, delays: list[int]) -> str:
    delay = level_delay_ms(level, delays)
    if delay is None:
        return f"delay level {level} (not in messageDelayLevel: {len(delays)} levels)"
    return f"delay level {level} ({format_duration(delay)})"


def _due_text(due: int | None) -> str:
    return "never delivered while the level is missing" if due is None else f"due {_fmt(due)}"


def _delay_due(store: Store, rec: MessageRecord, level: int, delays: list[int]) -> int | None:
    """ConsumeQueue tagsCode of the schedule unit (§4.3), else `computeDeliverTimestamp`; None when
    the level is missing from messageDelayLevel (no task delivers it: `is_level_started`)."""
    if level_delay_ms(level, delays) is None:
        return None
    cq = store.consume_queue(rec.topic, rec.queue_id)
    unit = cq.unit(rec.queue_offset) if cq is not None else None
    if unit is not None and unit.commitlog_offset == rec.physical_offset and unit.tags_code > 0:
        return unit.tags_code
    return compute_deliver_timestamp(level, rec.store_timestamp, delays)


def _role(rec: MessageRecord, join: str, first: bool, st: _State) -> str:
    """What the record is in the message's life (the module docstring's table); `join`: how the family found it."""
    p = rec.properties
    if join in ("cancel", "op"):
        return join
    if rec.topic == names.RMQ_SYS_SCHEDULE_TOPIC:
        retry = (p.get(names.PROPERTY_REAL_TOPIC) or "").startswith(names.RETRY_GROUP_TOPIC_PREFIX)
        return "retry_delay" if retry else "delay"
    if rec.topic == names.TIMER_TOPIC:
        if names.PROPERTY_TIMER_DEL_UNIQKEY in p:
            return "cancel_request"
        return "roll" if was_rolled(p) else "timer"
    if rec.topic == names.RMQ_SYS_TRANS_HALF_TOPIC:
        return "half" if st.half is None else "half_copy"
    if rec.topic == names.RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC:
        return "discard"
    if rec.topic == names.RMQ_SYS_TRANS_OP_HALF_TOPIC:
        return "op"
    if rec.transaction in ("commit", "rollback"):
        return rec.transaction
    if rec.topic.startswith(names.DLQ_GROUP_TOPIC_PREFIX):
        return "dlq"
    if rec.topic.startswith(names.RETRY_GROUP_TOPIC_PREFIX):  # reviveRetry sets 1ST_POP_TIME, no RETRY_TOPIC
        pop = names.PROPERTY_FIRST_POP_TIME in p and names.PROPERTY_RETRY_TOPIC not in p
        return "revived" if pop else "retry"
    if first or (st.park is None and not was_dequeued(p)):
        return "stored"  # no service put it here: the producer did (a resend or a batch member)
    return "delivered"


def _timer_slot_text(units: list[TimerLogUnit], due: int) -> tuple[int | None, str, int | None, bool]:
    """(write time, text, slot, rolls there) of the record's last TimerLog unit (`units`: the record's)."""
    units = [u for u in units if not u.magic & MAGIC_DELETE]
    if not units:
        return None, f"not yet in the TimerLog (the enqueue service has not read it); due {_fmt(due)}", None, False
    u = units[-1]
    slot = u.delayed_time_ms
    unit = f"TimerLog @{u.pos} (write time {_fmt(u.curr_write_time_ms)})"
    if u.magic & MAGIC_ROLL:
        return (
            u.curr_write_time_ms,
            f"{unit}: wheel slot {_fmt(slot)}, the end of the roll window; "
            f"it rolls there and is parked again for its due time {_fmt(due)}",
            slot,
            True,
        )
    return u.curr_write_time_ms, f"{unit}: wheel slot {_fmt(slot)} (due {_fmt(due)})", slot, False


def _immunity_ms(rec: MessageRecord, cfg: BrokerConfig) -> int:
    return check_immunity_time(
        rec.properties.get(names.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS), cfg.transaction_timeout
    )


def _discard_text(rec: MessageRecord, st: _State, cfg: BrokerConfig) -> str:
    text = check_times_of(rec.properties)
    n = _int(text) or 0
    mx = cfg.transaction_check_max
    imm = f" and {st.immunity_puts} immunity re-put(s)" if st.immunity_puts else ""
    # `needDiscard` leaves the count as it is when it discards; `needSkip` after it had incremented it
    why = (
        f"TRANSACTION_CHECK_TIMES={n} >= transactionCheckMax={mx}"
        if need_discard(text, mx)[0]
        else f"TRANSACTION_CHECK_TIMES={n} < transactionCheckMax={mx} of this config: the broker ran with a "
        f"lower limit (pass its broker.conf with --config) or the half was older than "
        f"fileReservedTime={cfg.file_reserved_time}h"
    )
    return f"discarded after {_n(st.checks, 'check')}{imm} ({why}); moved to {_place(rec)}"


def _last_read(store: Store) -> int | None:
    """timercheck's lastReadTimeMs: the wheel slots before it were read."""
    tc = store.timercheck
    return tc.last_read_time_ms if tc is not None else None


def _level_offset(store: Store, level: int | None) -> int | None:
    do = store.config_files.delay_offsets
    if do is None or level is None:
        return None
    return do.offset_table.get(level)


def _consumed_text(store: Store, rec: MessageRecord) -> str:
    cs = consumers(store, rec)
    if not cs:
        return f"; no consumer group has committed an offset on {rec.topic}"
    done = [g for g, _o, c in cs if c]
    todo = [g for g, _o, c in cs if not c]
    out = ""
    if done:
        out += ", consumed by " + ", ".join(done)
    if todo:
        out += ("; " if done else ", ") + "not yet consumed by " + ", ".join(todo)
    return out


class Timeline:
    """Builds stages and the verdict for one family of records (see the module docstring)."""

    def __init__(self, store: Store, family: Family, as_of: int, broker_version: str = "5.3"):
        self.store = store
        self.fam = family
        self.as_of = as_of
        self.v4 = broker_version.startswith("4")  # whose check rounds a transaction's prediction follows
        self.cfg = store.config
        self.delays = delay_levels_in_effect(store)[0]  # the config's, or without one what the units imply
        self.stages: list[Stage] = []
        self.popped_by: set[str] | tuple = ()  # the groups whose checkpoints cover the record being walked
        self.records: list[TracedRecord] = []
        self.st = _State()
        recs = family.sorted()
        timer_offs = {r.physical_offset for r in recs if r.topic == names.TIMER_TOPIC}
        self.units = timer_units(store, timer_offs)
        self.has_commit = any(r.transaction == "commit" for r in recs)
        self.has_rollback = any(r.transaction == "rollback" for r in recs)

    # ----------------------------------------------------------------- helpers

    def add(self, time: int | None, stage: str, rec: MessageRecord | None, detail: str) -> None:
        self.stages.append(Stage.at(time, stage, rec, detail))

    def _consumption(self, rec: MessageRecord) -> None:
        for group, off, done in consumers(self.store, rec):
            if group in self.popped_by:  # a POP group's offset moves at the pop: its pops and acks say more
                continue
            if done:
                self.add(None, "consumed", rec, f"consumer group {group}: committed offset {off} > {rec.queue_offset}")
            elif off is None:
                self.add(
                    None, "not_consumed", rec, f"consumer group {group}: no committed offset for queue {rec.queue_id}"
                )
            else:
                self.add(
                    None,
                    "not_consumed",
                    rec,
                    f"consumer group {group}: committed offset {off} <= "
                    f"{rec.queue_offset} ({rec.queue_offset - off + 1} message(s) to go)",
                )

    # ----------------------------------------------------------------- the walk

    def build(self) -> tuple[list[TracedRecord], list[Stage], Verdict]:
        recs = self.fam.sorted()
        members = [r for r in recs if self.fam.joins[r.physical_offset] == "member"]
        first = members[0] if members else recs[0]
        pg = first.properties.get(names.PROPERTY_PRODUCER_GROUP)
        self.add(
            first.born_timestamp, "born", None, f"born at {first.born_host}" + (f", producer group {pg}" if pg else "")
        )
        seen_first = False
        for rec in recs:
            is_first = rec is first and not seen_first
            role = _role(rec, self.fam.joins[rec.physical_offset], is_first, self.st)
            seen_first = seen_first or is_first
            self.records.append(TracedRecord(rec, role))
            if is_first and role != "stored":
                self.add(rec.store_timestamp, "stored", rec, f"written to {_place(rec)} (offsetMsgId {rec.msg_id})")
            popped = role in ("stored", "delivered", "revived")
            pops, self.popped_by = pop_stages(self.store, rec) if popped else ([], ())
            getattr(self, f"_on_{role}")(rec)
            self.stages += pops
        self._after_walk()
        return self.records, self.stages, _verdict(self)

    def _on_stored(self, rec: MessageRecord) -> None:
        if self.st.delivered is None and self.st.park is None:
            self.add(rec.store_timestamp, "stored", rec, f"written to {_place(rec)} (offsetMsgId {rec.msg_id})")
        else:
            self.add(
                rec.store_timestamp,
                "stored",
                rec,
                f"another record with the same UNIQ_KEY in {_place(rec)} (a producer resend or a batch member)",
            )
        self._deliver(rec)

    def _deliver(self, rec: MessageRecord, state: str = "delivered") -> None:
        self.st.delivered = rec
        self.st.park = None
        self.st.state = state
        self._consumption(rec)

    def _on_delay(self, rec: MessageRecord) -> None:
        level = queue_id_2_delay_level(rec.queue_id)
        due = _delay_due(self.store, rec, level, self.delays)
        asked = _int(rec.properties.get(names.PROPERTY_DELAY_TIME_LEVEL))
        clamp = f" (DELAY={asked} clamped to the last level)" if asked is not None and asked > level else ""
        self.add(
            rec.store_timestamp,
            "parked",
            rec,
            f"{_level_text(level, self.delays)}{clamp} "
            f"in {names.RMQ_SYS_SCHEDULE_TOPIC}/{rec.queue_id}, {_due_text(due)}, for {_real(rec)}",
        )
        self.st.park = _Park("delay", rec, due, level=level)
        self.st.state = "waiting"

    def _on_retry_delay(self, rec: MessageRecord) -> None:
        level = queue_id_2_delay_level(rec.queue_id)
        due = _delay_due(self.store, rec, level, self.delays)
        group = (rec.properties.get(names.PROPERTY_REAL_TOPIC) or "")[len(names.RETRY_GROUP_TOPIC_PREFIX) :]
        self.add(
            rec.store_timestamp,
            "retry_scheduled",
            rec,
            f"sent back by consumer group {group} (reconsume #{rec.reconsume_times}), "
            f"{_level_text(level, self.delays)}, {_due_text(due)}",
        )
        self.st.park = _Park("retry_delay", rec, due, level=level)
        self.st.state = "waiting"

    def _on_timer(self, rec: MessageRecord) -> None:
        due = _int(rec.properties.get(names.PROPERTY_TIMER_OUT_MS)) or rec.store_timestamp
        _when, text, slot, rolls = _timer_slot_text(self.units.get(rec.physical_offset, []), due)
        self.add(rec.store_timestamp, "parked", rec, f"timer for {_real(rec)}: {text}")
        self.st.park = _Park("timer", rec, due, slot=slot, rolls=rolls)
        self.st.state = "waiting"

    def _on_roll(self, rec: MessageRecord) -> None:
        due = _int(rec.properties.get(names.PROPERTY_TIMER_OUT_MS)) or rec.store_timestamp
        n = roll_times(rec.properties)
        _when, text, slot, rolls = _timer_slot_text(self.units.get(rec.physical_offset, []), due)
        self.add(rec.store_timestamp, "rolled", rec, f"roll #{n}: re-put to {names.TIMER_TOPIC}; {text}")
        self.st.park = _Park("timer", rec, due, slot=slot, rolls=rolls)
        # a cancel written before the roll still meets the message in its final slot (`cancels_in_slot`)
        cancelled = self.st.cancel is not None and cancels_in_slot(
            self.st.cancel_slot, due, self.cfg.timer_precision_ms
        )
        self.st.state = "cancelled" if cancelled else "waiting"

    def _on_cancel(self, rec: MessageRecord) -> None:
        slot = _int(rec.properties.get(names.PROPERTY_TIMER_OUT_MS))
        park = self.st.park
        target_slot = (
            _int(park.rec.properties.get(names.PROPERTY_TIMER_OUT_MS)) if park and park.kind == "timer" else None
        )
        if park is None or park.kind != "timer":
            effect = "the message is not parked in the timer wheel: no effect"
        elif cancels_in_slot(slot, target_slot, self.cfg.timer_precision_ms):
            effect = "same slot as the message: it will be dropped when the slot is read"
            self.st.cancel, self.st.cancel_slot = rec, slot
            self.st.state = "cancelled"
        else:
            effect = f"the message sits in slot {_fmt(target_slot)}: a cancel only works in the same slot (no effect)"
        self.add(
            rec.store_timestamp,
            "cancel_requested",
            rec,
            f"cancel record {rec.physical_offset} "
            f"(UNIQ_KEY {rec.uniq_key}, TIMER_DEL_UNIQKEY) for slot {_fmt(slot)}; {effect}",
        )

    def _on_cancel_request(self, rec: MessageRecord) -> None:
        target = del_target(rec.properties.get(names.PROPERTY_TIMER_DEL_UNIQKEY))
        slot = _int(rec.properties.get(names.PROPERTY_TIMER_OUT_MS))
        self.add(rec.store_timestamp, "parked", rec, f"timer cancel request for UNIQ_KEY {target} in slot {_fmt(slot)}")
        self.st.cancel_target, self.st.cancel_slot = target, slot
        self.st.state = "cancel_request"

    def _on_half(self, rec: MessageRecord) -> None:
        p = rec.properties
        imm = p.get(names.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS)
        self.add(
            rec.store_timestamp,
            "parked",
            rec,
            f"half message for {_real(rec)}, producer group {p.get(names.PROPERTY_PRODUCER_GROUP)}"
            + (f", CHECK_IMMUNITY_TIME_IN_SECONDS={imm}" if imm else ""),
        )
        self.st.half = rec
        self.st.state = "pending"

    def _on_half_copy(self, rec: MessageRecord) -> None:
        p = rec.properties
        n = check_times_of(p)
        n = "?" if n is None else n
        age = rec.store_timestamp - rec.born_timestamp
        # `putImmunityMsgBackToHalfQueue` writes TRAN_PREPARED_QUEUE_OFFSET; the visit was immune then
        immune = (
            names.PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET in p
            and immunity(age, _immunity_ms(rec, self.cfg), names.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS in p)
            == IMMUNE_PUT_BACK
        )
        if immune:
            self.st.immunity_puts += 1
            detail = (
                f"immunity re-put at half offset {rec.queue_offset} (age {format_duration(age)} < "
                f"CHECK_IMMUNITY_TIME_IN_SECONDS={p[names.PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS]}; "
                "no check request; "
                f"TRANSACTION_CHECK_TIMES={n})"
            )
        else:
            self.st.checks += 1
            detail = (
                f"check #{self.st.checks}: copy put back at half offset {rec.queue_offset} "
                f"(TRANSACTION_CHECK_TIMES={n}); check request sent to producer group "
                f"{p.get(names.PROPERTY_PRODUCER_GROUP)}"
            )
        self.add(rec.store_timestamp, "put_back", rec, detail)
        self.st.copies.append(rec)

    def _on_commit(self, rec: MessageRecord) -> None:
        half = self.fam.records.get(rec.prepared_transaction_offset)
        hq = f" (half queue offset {half.queue_offset})" if half is not None else ""
        self.add(
            rec.store_timestamp,
            "committed",
            rec,
            f"end transaction COMMIT of the half at {rec.prepared_transaction_offset}{hq}; now in {_place(rec)}",
        )
        self.st.commit = rec
        self._deliver(rec, "committed")

    def _on_rollback(self, rec: MessageRecord) -> None:
        self.add(
            rec.store_timestamp,
            "rolled_back",
            rec,
            f"end transaction ROLLBACK of the half at {rec.prepared_transaction_offset}",
        )
        self.st.rollback = rec
        self.st.state = "rolled_back"

    def _on_op(self, rec: MessageRecord) -> None:
        mine = {
            r.queue_offset
            for r in self.fam.records.values()
            if r.topic == names.RMQ_SYS_TRANS_HALF_TOPIC and r.queue_id == rec.queue_id
        }
        offs = [o for o in op_offsets(rec) if o in mine]
        listed = ",".join(str(o) for o in offs)
        if not self.has_commit and not self.has_rollback and self.st.rollback is None:
            self.add(
                rec.store_timestamp,
                "rolled_back",
                rec,
                f"op record {rec.physical_offset} removes half queue "
                f"offset {listed}; no COMMIT record exists: rolled back",
            )
            self.st.rollback = rec
            self.st.state = "rolled_back"
        else:
            self.add(
                rec.store_timestamp, "op", rec, f"op record {rec.physical_offset} marks half queue offset {listed} done"
            )

    def _on_discard(self, rec: MessageRecord) -> None:
        self.add(rec.store_timestamp, "discarded", rec, _discard_text(rec, self.st, self.cfg))
        self.st.discard = rec
        self.st.state = "discarded"

    def _on_delivered(self, rec: MessageRecord) -> None:
        park = self.st.park
        p = rec.properties
        if park is not None and park.kind == "delay":
            how = f"re-put by the schedule service from level {park.level}" + (
                "" if park.due is None else f", {format_duration(rec.store_timestamp - park.due)} after due"
            )
        elif park is not None and park.kind == "timer" or was_dequeued(p):
            due = park.due if park is not None else _int(p.get(names.PROPERTY_TIMER_OUT_MS))
            dequeue = dequeue_ms(p)
            how = f"re-put by the timer service (TIMER_DEQUEUE_MS {_fmt(dequeue)})" + (
                f", {format_duration(rec.store_timestamp - due)} after due" if due else ""
            )
        else:
            how = "another record with the same UNIQ_KEY"
        self.add(rec.store_timestamp, "delivered", rec, f"{how}; now in {_place(rec)}")
        self._deliver(rec)

    def _on_retry(self, rec: MessageRecord) -> None:
        group = rec.topic[len(names.RETRY_GROUP_TOPIC_PREFIX) :]
        self.add(
            rec.store_timestamp,
            "retry",
            rec,
            f"redelivered to {_place(rec)} for consumer group {group} "
            f"(reconsume #{rec.reconsume_times}, RETRY_TOPIC={rec.properties.get(names.PROPERTY_RETRY_TOPIC)})",
        )
        self._deliver(rec)

    def _on_revived(self, rec: MessageRecord) -> None:
        first = _int(rec.properties.get(names.PROPERTY_FIRST_POP_TIME))
        self.add(
            rec.store_timestamp,
            "revived",
            rec,
            f"not acked in time: revived by PopReviveService into "
            f"{_place(rec)} (reconsume #{rec.reconsume_times}, first popped {_fmt(first)})",
        )
        self._deliver(rec)

    def _on_dlq(self, rec: MessageRecord) -> None:
        group = rec.topic[len(names.DLQ_GROUP_TOPIC_PREFIX) :]
        self.add(
            rec.store_timestamp,
            "dead_lettered",
            rec,
            f"moved to the dead-letter queue of consumer group "
            f"{group} after {_n(rec.reconsume_times, 'reconsume')}; now in {_place(rec)}",
        )
        self.st.dlq = rec
        self._deliver(rec, "dead_lettered")

    # ----------------------------------------------------------------- after the walk

    def _after_walk(self) -> None:
        st = self.st
        read = _last_read(self.store)
        if st.state == "cancelled" and st.cancel_slot is not None and read is not None and read > st.cancel_slot:
            self.add(
                st.cancel_slot,
                "cancelled",
                None,
                f"the timer service read slot {_fmt(st.cancel_slot)} and "
                f"dropped the message (cancel record {st.cancel.physical_offset})",
            )
        park = st.park
        if st.state == "waiting" and park is not None and park.kind in ("delay", "retry_delay"):
            nxt = _level_offset(self.store, park.level)
            if nxt is not None and nxt > park.rec.queue_offset:
                st.state = "skipped"
                self.add(
                    None,
                    "skipped",
                    park.rec,
                    f"delayOffset.json has level {park.level} at offset {nxt} > "
                    f"{park.rec.queue_offset}, but no delivered record exists: the schedule service moved "
                    "past it after a failed put (§4.4)",
                )


# ----------------------------------------------------------------- the verdict: a view over the finished walk


def _verdict(t: Timeline) -> Verdict:
    st = t.st
    s = st.state
    again = ""
    if st.half is not None and s in ("pending", "committed", "rolled_back", "discarded"):
        row = _tx_row(t)  # `inspect transactions` decides the transaction's state
        if row is not None and row["state"] != s:
            s = st.state = row["state"]
        nxt = ((row or {}).get("prediction") or {}).get("next_check_ms")
        if s in ("committed", "rolled_back") and nxt is not None:
            again = (
                f"; the check rounds read its half again: checked at {_fmt(nxt)}, and a producer that "
                "answered answers again"
            )
    v = _state_verdict(t, s)
    return Verdict(v.state, v.text + again, v.due) if again else v


def _state_verdict(t: Timeline, s: str) -> Verdict:
    st = t.st
    if s in ("delivered", "committed", "dead_lettered") and st.delivered is not None:
        rec = st.delivered
        where = f"{_fmt(rec.store_timestamp)} to {_place(rec)}"
        if s == "committed":
            return Verdict(s, f"committed {where}" + _consumed_text(t.store, rec))
        if s == "dead_lettered":
            return Verdict(
                s, f"dead-lettered {where} after {_n(rec.reconsume_times, 'reconsume')}" + _consumed_text(t.store, rec)
            )
        redelivered = " (retry)" if rec.topic.startswith(names.RETRY_GROUP_TOPIC_PREFIX) else ""
        return Verdict(s, f"delivered {where}{redelivered}" + _consumed_text(t.store, rec))
    if s == "cancelled":
        read = _last_read(t.store)
        when = (
            "dropped when its slot was read"
            if read is not None and read > st.cancel_slot
            else f"dropped when slot {_fmt(st.cancel_slot)} is read"
        )
        return Verdict(s, f"cancelled by {st.cancel.physical_offset} ({when})")
    if s == "cancel_request":
        return Verdict(
            s, f"cancel request for UNIQ_KEY {st.cancel_target} in slot {_fmt(st.cancel_slot)}: never delivered itself"
        )
    if s == "rolled_back":
        rec = st.rollback
        kind = "op" if rec.topic == names.RMQ_SYS_TRANS_OP_HALF_TOPIC else "ROLLBACK"
        return Verdict(s, f"rolled back {_fmt(rec.store_timestamp)} ({kind} record {rec.physical_offset})")
    if s == "discarded":
        return Verdict(s, _discard_text(st.discard, st, t.cfg))
    if s == "pending":
        return _pending(t)
    if s == "skipped":
        return Verdict(
            s,
            "skipped: the schedule service moved past it after a failed put "
            f"(delay level {st.park.level}, queue offset {st.park.rec.queue_offset})",
        )
    if s == "waiting" and st.park is not None:
        return _waiting(t, st.park)
    return Verdict("unknown", "the records found do not tell where the message is")


def _waiting(t: Timeline, park: _Park) -> Verdict:
    due, as_of = park.due, t.as_of
    if park.kind == "timer":
        read = _last_read(t.store)
        where = f"timer wheel slot {_fmt(park.slot)}" if park.slot is not None else "the timer topic"
        if park.rolls:
            where += " until it rolls"
        if due <= as_of:
            seen = (
                f"; the timer service read its slot at {_fmt(read)} but no delivered record exists"
                if read is not None and park.slot is not None and read > park.slot
                else "; the timer service had not reached its slot"
            )
            return Verdict(
                "overdue",
                f"overdue: due {_fmt(due)} ({format_duration(as_of - due)} before the "
                f"store's last activity {_fmt(as_of)}){seen}",
                due,
            )
        return Verdict("waiting", f"waiting: due {_fmt(due)} (in {format_duration(due - as_of)}), {where}", due)
    what = f"delay level {park.level}" + (" (retry)" if park.kind == "retry_delay" else "")
    if due is None:
        return Verdict(
            "never",
            f"never delivered: {what} is not in messageDelayLevel ({len(t.delays)} "
            "levels), so ScheduleMessageService runs no task for it; it waits in "
            f"{names.RMQ_SYS_SCHEDULE_TOPIC}/{park.rec.queue_id}@{park.rec.queue_offset} until the "
            "level is configured again",
        )
    if due <= as_of:
        return Verdict(
            "overdue",
            f"overdue: due {_fmt(due)} ({format_duration(as_of - due)} before the store's "
            f"last activity {_fmt(as_of)}), {what}; the schedule service had not delivered it",
            due,
        )
    return Verdict("waiting", f"waiting: due {_fmt(due)} (in {format_duration(due - as_of)}), {what}", due)


def _tx_row(t: Timeline) -> dict | None:
    """The `inspect transactions` row of this half (its state and check prediction), reused as is: made
    from its records and the others its half queue's check rounds read (`check_queue_records`)."""
    from mqtool.inspect.transactions import TransactionScan, check_queue_records

    ts = TransactionScan()
    mine = t.fam.sorted()
    for rec in mine:
        ts.feed(rec)
    seen = {r.physical_offset for r in mine}
    if t.st.half is not None:
        for rec in check_queue_records(t.store, t.st.half.queue_id):
            if rec.physical_offset not in seen:
                ts.feed(rec)
    rows = ts.report(t.store, t.as_of, t.v4)["half_messages"]
    return next(
        (
            r
            for r in rows
            if r["physical_offset"] in seen or r["copies"] and any(c["physical_offset"] in seen for c in r["copies"])
        ),
        None,
    )


def _pending(t: Timeline) -> Verdict:
    st = t.st
    row = _tx_row(t)
    pred = (row or {}).get("prediction") or {}
    nxt, discard = pred.get("next_check_ms"), pred.get("discard_ms")
    mx = t.cfg.transaction_check_max
    interval = format_duration(t.cfg.transaction_check_interval)
    tail = (
        f" ({st.checks} check(s) so far, transactionCheckMax={mx}, a round every {interval} from the "
        f"store's last activity {_fmt(t.as_of)})"
    )
    if nxt is not None:
        head = f"pending transaction: next check at {_fmt(nxt)}"
        if discard is not None:
            head += f", discarded at {_fmt(discard)} unless the producer answers"
        return Verdict("pending", head + tail, nxt)
    if discard is not None:
        return Verdict(
            "pending",
            f"pending transaction: no further check, discarded at {_fmt(discard)} "
            f"({pred.get('discard_reason')})" + tail,
            discard,
        )
    return Verdict("pending", "pending transaction: waiting for the producer's answer" + tail)


def build_timeline(
    store: Store, family: Family, as_of: int, broker_version: str = "5.3"
) -> tuple[list[TracedRecord], list[Stage], Verdict]:
    """The records with roles, the stages and the verdict of one message (`broker_version`: whose rules the
    predictions follow, as `inspect transactions --broker-version`)."""
    return Timeline(store, family, as_of, broker_version).build()


__all__ = ["build_timeline", "consumers", "store_as_of", "timer_units", "upper"]
