"""The `restart` view: what the broker will do when it starts on this store now.

- **recovery** (`mqtool.store.recovery`): clean or abnormal start, where valid data ends, what is cut;
- **duplicates**: messages already on their real topic that a restart delivers again, each with its
  reason, found in the stored records (only records before the recovered end count): a delay level's
  persisted offset behind delivered units (`ScheduleMessageService` restarts from `delayOffset.json`),
  a timer slot at or after timercheck's read time whose messages were delivered (the dequeue re-reads
  it), a committed transaction whose half is at or after the persisted half offset and not covered by
  an op (the check service checks it again; a producer that committed answers COMMIT again); halves
  checked again without a delivery are `rechecks`;
- **late**: per delay level and for the wheel, what is overdue and when it goes out; the transactions
  checked in the first rounds and those that will be discarded (the `delay`, `timer` and
  `transactions` views);
- **replay**: the first `for_ms` after the start through `mqtool.simulate.simulate`, summarised.

`text` holds the same as (section, rows) for a plain renderer.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from mqtool.formats.message import RecordError
from mqtool.formats.names import (
    CID_SYS_RMQ_TRANS,
    PROPERTY_DELAY_TIME_LEVEL,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    REMOVE_TAG,
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_TRANS_OP_HALF_TOPIC,
    TIMER_TOPIC,
)
from mqtool.formats.opbody import parse_op_body
from mqtool.inspect import JSON_VERSION
from mqtool.inspect.delay import delay_view
from mqtool.inspect.timer import slot_chain, timer_view, view_cancels, view_slots
from mqtool.inspect.transactions import transactions_view
from mqtool.rules.recovery import timer_read_time
from mqtool.rules.schedule import correct_delay_offset, correct_deliver_timestamp, first_delivery_after_start
from mqtool.rules.timer import was_dequeued
from mqtool.rules.transaction import discard_outcomes, next_round_visits
from mqtool.store.delaylevels import config_in_effect
from mqtool.store.findings import Findings, sort_findings
from mqtool.store.recovery import recovery_plan
from mqtool.store.store import Store

DEFAULT_FOR_MS = 600_000
FIRST_ROWS = 5


class _Stored:
    """One pass over the records before the recovered end: deliveries by (topic, UNIQ_KEY), ops, commits.

    The pass starts at `start`, the earliest record a duplicate can come from (`_scan_from`): a delivery,
    commit or op always follows its source record, and after a crash the candidates lie near the end.
    It decodes each record from there (`iter_records`); the column scan (`inspect/columns.py`) would not
    save much: the deliveries are ordinary records on user topics, told apart only by their properties
    (REAL_TOPIC with the timer's dequeue time or DELAY), which the columns do not carry.
    """

    def __init__(self, store: Store, end: int, start: int | None = None):
        self.deliveries: dict[tuple[str, str], list[tuple[int, int, str]]] = {}
        self.ops: set[tuple[int, int]] = set()
        self.commits: dict[int, int] = {}
        self.committed: set[tuple[str, str]] = set()  # (real topic, UNIQ_KEY) of COMMIT records
        for rec in store.commitlog.iter_records(start, verify_crc=False):
            if rec.physical_offset + rec.total_size > end:
                break
            p = rec.properties
            kind = None
            if rec.topic not in (RMQ_SYS_SCHEDULE_TOPIC, TIMER_TOPIC) and PROPERTY_REAL_TOPIC in p:
                if was_dequeued(p):
                    kind = "timer"
                elif PROPERTY_DELAY_TIME_LEVEL in p:
                    kind = "delay"
            if kind and rec.uniq_key:
                self.deliveries.setdefault((rec.topic, rec.uniq_key), []).append(
                    (rec.physical_offset, rec.store_timestamp, kind))
            if rec.topic == RMQ_SYS_TRANS_OP_HALF_TOPIC and rec.tags == REMOVE_TAG:
                self.ops |= {(rec.queue_id, off) for off in parse_op_body(rec.body)}
            if rec.transaction == "commit":
                self.commits.setdefault(rec.prepared_transaction_offset, rec.physical_offset)
                self.committed.add((rec.topic, rec.uniq_key or ""))

    def delivery_after(self, topic: str | None, uniq_key: str | None, offset: int, kind: str):
        """The first stored delivery of this message made after its system-topic record at `offset`."""
        for phys, ts, k in self.deliveries.get((topic or "", uniq_key or ""), ()):
            if phys > offset and k == kind:
                return phys, ts
        return None


def _delay(store: Store, dv: dict, plan: dict, stored: _Stored, at_ms: int) -> tuple[list, list]:
    """Per level: duplicates (delivered units from the restart offset on) and the late/due summary.

    Every unit from the restart offset is late or due alike, delivered before or not (the `delay`
    view's overdue is its head's): `overdue` counts them all, `delivered_before` the duplicates among
    them, and `goes_out_ms` is when the head goes out (`first_delivery_after_start`). A level missing
    from messageDelayLevel gets no task: its backlog is `never_delivered` and it never goes out.
    """
    end, maxes = plan["_end"], plan["_max_offsets"]
    dups, levels = [], []
    for row in dv["levels"]:
        if row["max_offset"] is None:
            continue
        qid, delay = row["queue_id"], row["delay_ms"]
        persisted, start, hi = _level_start(row, maxes)
        entry = {"level": row["level"], "queue_id": qid, "configured": row["configured"],
                 "persisted_offset": persisted, "restart_offset": start, "max_offset": hi,
                 "backlog": max(0, hi - start), "overdue": 0, "overdue_by_ms": 0, "delivered_before": 0,
                 "never_delivered": 0, "goes_out_ms": None}
        levels.append(entry)
        if not row["configured"]:
            entry["never_delivered"] = entry["backlog"]
            continue
        cq = store.consume_queue(RMQ_SYS_SCHEDULE_TOPIC, qid)
        for u in cq.iter_units(start):
            if u.queue_offset >= hi:
                break
            if entry["goes_out_ms"] is None:
                entry["goes_out_ms"] = first_delivery_after_start(at_ms, u.tags_code, delay)
            due = correct_deliver_timestamp(at_ms, u.tags_code, delay)
            if due <= at_ms:
                entry["overdue"] += 1
                entry["overdue_by_ms"] = max(entry["overdue_by_ms"], at_ms - due)
            rec = _read(store, u.commitlog_offset, end)
            real = rec.properties.get(PROPERTY_REAL_TOPIC) if rec else None
            hit = stored.delivery_after(real, rec.uniq_key, rec.physical_offset, "delay") if rec else None
            if hit:
                entry["delivered_before"] += 1
                dups.append(_dup("delay", rec, real, hit, first_delivery_after_start(at_ms, u.tags_code, delay),
                                 f"delay level {row['level']}: delayOffset.json holds offset "
                                 f"{persisted if persisted is not None else 'none (0)'}, the broker restarts from "
                                 f"{start}, but queue offset {u.queue_offset} was already delivered",
                                 level=row["level"], queue_offset=u.queue_offset))
    return dups, levels


def _level_start(row: dict, maxes: dict) -> tuple[int | None, int, int]:
    """(persisted offset, where the level restarts: `correctDelayOffset`, its max after recovery)."""
    hi = maxes.get((RMQ_SYS_SCHEDULE_TOPIC, row["queue_id"]), row["max_offset"])
    persisted = row["offset"] if row["offset_stored"] else None
    if not row["configured"]:  # correctDelayOffset walks delayLevelTable only
        return persisted, max(row["corrected_offset"], row["min_offset"]), hi
    start = correct_delay_offset(persisted, row["min_offset"], hi)
    return persisted, row["min_offset"] if start is None else start, hi


def _scan_from(store: Store, dv: dict, tv: dict, txv: dict, plan: dict) -> int:
    """The earliest source record of a possible duplicate: the first schedule unit each level restarts
    from, the units of the slots the timer dequeue reads again, every copy of a half checked again."""
    offsets = [plan["_end"]]
    for row in dv["levels"]:
        if row["max_offset"] is None or not row["configured"]:
            continue  # a level missing from messageDelayLevel delivers nothing: no duplicate either
        _, start, hi = _level_start(row, plan["_max_offsets"])
        u = next(iter(store.consume_queue(RMQ_SYS_SCHEDULE_TOPIC, row["queue_id"]).iter_units(start)), None)
        if u is not None and u.queue_offset < hi:
            offsets.append(u.commitlog_offset)
    cp, last = tv["checkpoint"], store.last_activity_ms()
    if cp is not None and tv["wheel"]["present"]:  # slots read again that the broker could have delivered
        recovered = view_slots(tv)
        offsets += [u["offset_py"] for slot in tv["slots"] if cp["last_read_time_ms"] <= slot["time_ms"] <= last
                    for u in slot_chain(store, slot["time_ms"], slots=recovered)["units"]]
    half_offset = {p["queue_id"]: p["half_offset"] or 0 for p in txv["check_progress"]}
    for row in txv["half_messages"]:
        members = [(row["queue_offset"], row["physical_offset"])]
        members += [(c["queue_offset"], c["physical_offset"]) for c in row["copies"]]
        if any(q >= half_offset.get(row["queue_id"], 0) for q, _ in members):
            offsets += [p for _, p in members]
    # a damaged unit may point between records: only offsets where a record starts are places to start
    return min(o for o in offsets if o == plan["_end"] or _read(store, o, plan["_end"]) is not None)


def _read(store: Store, offset: int, end: int):
    if offset >= end:
        return None
    try:
        return store.commitlog.read(offset)
    except RecordError:
        return None


def _dup(kind: str, rec, real: str | None, hit: tuple[int, int], due: int, reason: str, **extra) -> dict:
    return {"kind": kind, "topic": real, "queue_id": _qid(rec), "uniq_key": rec.uniq_key, "keys": rec.keys,
            "source_offset": rec.physical_offset, "delivered_offset": hit[0], "delivered_at_ms": hit[1],
            "again_at_ms": due, "reason": reason, **extra}


def _qid(rec) -> int | None:
    v = rec.properties.get(PROPERTY_REAL_QUEUE_ID, "")
    return int(v) if v.lstrip("-").isdigit() else None


def _timer(store: Store, tv: dict, plan: dict, stored: _Stored, at_ms: int) -> tuple[list, dict]:
    """Slots the dequeue reads again (time >= its restart read time): duplicates, overdue, skipped."""
    cp = tv["checkpoint"]
    if cp is None or not tv["wheel"]["present"]:
        return [], {"present": False}
    precision = tv["precision_ms"]
    last_read = cp["last_read_time_ms"]
    read = timer_read_time(last_read, at_ms, precision, tv["wheel"]["slots_total"])
    end = plan["_end"]
    dups, overdue, pending, skipped, first_out = [], 0, 0, [], None
    recovered = view_slots(tv)  # the wheel once recovery has revised it from the TimerLog
    cancels = view_cancels(store, tv)  # cancels by the slot they end in, after their rolls
    for slot in tv["slots"]:
        t = slot["time_ms"]
        if t < last_read:
            continue
        chain = slot_chain(store, t, slots=recovered, later=cancels)
        for u in chain["units"]:
            if u["kind"] == "delete" or u["state"] not in ("pending", "rolls on"):  # a roll unit waits too
                continue
            if t < read:
                skipped.append({"slot_ms": t, "uniq_key": u["uniq_key"], "topic": u["real_topic"]})
                continue
            rec = _read(store, u["offset_py"], end)
            if rec is None:
                continue  # past the recovered end: a dangling unit (recovery findings)
            hit = stored.delivery_after(u["real_topic"], u["uniq_key"], u["offset_py"], "timer")
            if hit:
                dups.append(_dup("timer", rec, u["real_topic"], hit, at_ms,
                                 f"timer slot {t}: config/timercheck's lastReadTimeMs {last_read} is not past it, "
                                 "so the dequeue reads the slot again, but this message was already delivered",
                                 slot_ms=t))
                continue
            pending += 1
            out = u["timer_out_ms"] or t
            if out <= at_ms:
                overdue += 1
            first_out = out if first_out is None else min(first_out, out)
    return dups, {"present": True, "last_read_time_ms": last_read, "restart_read_time_ms": read,
                  "pending": pending, "overdue": overdue, "earliest_ms": first_out,
                  "skipped": skipped}


def _transactions(txv: dict, plan: dict, stored: _Stored, at_ms: int, interval: int) -> tuple[list, list]:
    """Halves at or after the persisted half offset, not covered by an op: checked again at the first round."""
    end = plan["_end"]
    half_offset = {p["queue_id"]: p["half_offset"] for p in txv["check_progress"]}
    dups, rechecks = [], []
    for row in txv["half_messages"]:
        qid = row["queue_id"]
        members = [(row["queue_offset"], row["physical_offset"])]
        members += [(c["queue_offset"], c["physical_offset"]) for c in row["copies"]]
        members = [m for m in members if m[1] < end]
        start = half_offset.get(qid) or 0
        covered = {q for q, _ in members if (qid, q) in stored.ops}
        visits = next_round_visits([q for q, _ in members], start, covered)
        visited = [m for m in members if m[0] in visits]
        later = [m for m in members if visited and m[0] > visited[0][0]]
        commit = next((stored.commits[p] for _, p in members if p in stored.commits), None)
        if not visited or (commit is None and not later):
            continue
        v = visited[0]
        base = (f"half queue offset {start} ({CID_SYS_RMQ_TRANS} in consumerOffset.json) is not past queue "
                f"offset {v[0]}")
        if later:
            base += f", which was already checked (copy at queue offset {later[-1][0]})"
        pred = row["prediction"] or {}
        again = pred.get("next_check_ms") or at_ms + interval
        entry = {"kind": "transaction", "topic": row["real_topic"], "queue_id": row["real_queue_id"],
                 "uniq_key": row["uniq_key"], "keys": row["keys"], "source_offset": v[1],
                 "again_at_ms": again, "half_queue_offset": v[0]}
        if commit is not None:
            dups.append({**entry, "delivered_offset": commit, "delivered_at_ms": None,
                         "reason": base + ": the check service checks it again, and a producer that committed "
                                          "answers COMMIT again"})
        else:
            rechecks.append({**entry, "state": row["state"],
                             "reason": base + ": the producer gets another check request and another copy is "
                                              "put back"})
    return dups, rechecks


def _tx_rounds(txv: dict, at_ms: int, for_ms: int, v4: bool) -> tuple[list, list]:
    """The transactions view's predictions (every half the rounds read, committed ones too), with the times
    a discard may come at (`rules.transaction.discard_outcomes`: two on 4.9.8 where a race decides)."""
    first, discard = [], []
    s = txv["settings"]
    for row in txv["half_messages"]:
        pred = row["prediction"]
        if pred is None:
            continue
        outcomes = discard_outcomes(pred["discard_ms"], pred["discard_reason"], str(row["check_times"]),
                                    s["transaction_check_max"], s["transaction_check_interval_ms"], v4)
        brief = {"uniq_key": row["uniq_key"], "topic": row["real_topic"], "keys": row["keys"],
                 "state": row["state"], "check_times": row["check_times"], "next_check_ms": pred["next_check_ms"],
                 "discard_ms": pred["discard_ms"], "discard_outcomes": outcomes,
                 "discard_reason": pred["discard_reason"]}
        if pred["next_check_ms"] is not None and pred["next_check_ms"] <= at_ms + for_ms:
            first.append(brief)
        if pred["discard_ms"] is not None:
            discard.append(brief)
    return first, discard


def _replay(store: Store, config, at_ms: int, for_ms: int, txv: dict, stored: _Stored, broker_version: str,
            events_path: Path | str | None) -> dict:
    """`simulate` over [at, at + for): counts, first rows per kind; a committed transaction's producer
    answers COMMIT again, a rolled back one ROLLBACK (the answers a correct producer gives)."""
    from mqtool.simulate import simulate
    from mqtool.simulate.scenario import AnswerRule, Scenario

    answers = [AnswerRule({"committed": "commit", "rolled_back": "rollback"}[r["state"]], uniq_key=r["uniq_key"])
               for r in txv["half_messages"] if r["state"] in ("committed", "rolled_back") and r["uniq_key"]]
    result = simulate(store, config, at_ms, at_ms + for_ms, Scenario(answers=answers), 0, broker_version)
    counts: Counter[str] = Counter()
    first: dict[str, list] = {}
    again = []
    for e, d in zip(result.events, result.events.dicts(), strict=True):
        kind = f"{e.service} {e.event}"
        counts[kind] += 1
        if len(first.setdefault(kind, [])) < FIRST_ROWS:
            first[kind].append(d)
        key = (e.topic or "", e.uniq_key or "")
        if e.event == "deliver" and (key in stored.deliveries or key in stored.committed):
            again.append(d)
    if events_path is not None:
        Path(events_path).write_text(result.events.jsonl(), encoding="utf-8")
    return {"from_ms": at_ms, "until_ms": at_ms + for_ms, "events": len(result.events),
            "counts": dict(sorted(counts.items())), "first": first, "delivered_again": again,
            "violations": result.violations, "events_path": None if events_path is None else str(events_path)}


def restart_preview(store: Store, config=None, at_ms: int | None = None, for_ms: int = DEFAULT_FOR_MS,
                    events_path: Path | str | None = None, *, replay: bool = True,
                    broker_version: str = "5.3") -> dict:
    """The `restart` document for a start at `at_ms` (default: the store's own now)."""
    config = config_in_effect(store, config)  # no broker.conf: the delay levels the store's units imply
    at_ms = store.last_activity_ms() if at_ms is None else at_ms
    findings = Findings()
    v4 = broker_version.startswith("4")
    plan = recovery_plan(store, findings, v4=v4)
    dv, tv, txv = delay_view(store, at_ms), timer_view(store, at_ms), transactions_view(store, at_ms, v4=v4)
    stored = _Stored(store, plan["_end"], _scan_from(store, dv, tv, txv, plan))
    delay_dups, levels = _delay(store, dv, plan, stored, at_ms)
    timer_dups, wheel = _timer(store, tv, plan, stored, at_ms)
    tx_dups, rechecks = _transactions(txv, plan, stored, at_ms, config.transaction_check_interval)
    first_rounds, discards = _tx_rounds(txv, at_ms, for_ms, v4)
    duplicates = sorted(delay_dups + timer_dups + tx_dups, key=lambda d: (d["again_at_ms"], d["source_offset"]))
    overdue = sum(lv["overdue"] - lv["delivered_before"] for lv in levels) + wheel.get("overdue", 0)
    never = sum(lv["never_delivered"] for lv in levels)
    doc = {
        "version": JSON_VERSION,
        "view": "restart",
        "at_ms": at_ms,
        "for_ms": for_ms,
        "headline": headline(plan["shutdown"]["clean"], len(duplicates), overdue, never),
        "recovery": {k: v for k, v in plan.items() if not k.startswith("_")},
        "duplicates": duplicates,
        "rechecks": rechecks,
        "late": {"delay_levels": [lv for lv in levels if lv["backlog"]], "timer": wheel, "overdue": overdue,
                 "never_delivered": never},
        "transactions": {"first_rounds": first_rounds, "to_discard": discards},
        "replay": (_replay(store, config, at_ms, for_ms, txv, stored, broker_version, events_path)
                   if replay else None),
        "findings": [f.as_dict() for f in sort_findings(findings)],
    }
    doc["text"] = text_sections(doc)
    return doc


def _either(times: list[int]) -> str:
    """One time flatly, or the outcomes a race decides: "either at A (...) or at B (...)"."""
    if len(times) == 1:
        return f"at {times[0]}"
    return (f"either at {times[0]} (the reput service dispatched the copy before the round reached it) or at "
            f"{times[1]} (it had not: the next round)")


def headline(clean: bool, duplicates: int, overdue: int, never: int = 0) -> str | None:
    """The overview's line for a store not shut down cleanly (None after a clean shutdown); `overdue`
    counts the late messages not delivered before, `never` those of levels missing from messageDelayLevel."""
    if clean:
        return None
    line = f"restart preview: {duplicates} duplicate{'s' if duplicates != 1 else ''}, {overdue} overdue"
    return line + (f", {never} never delivered (delay level not configured)" if never else "")


def restart_headline(store: Store, config=None, at_ms: int | None = None) -> str | None:
    """`headline` of a preview without the replay (what the overview calls)."""
    if (store.root / "abort").exists():
        return restart_preview(store, config, at_ms, replay=False)["headline"]
    return None


def text_sections(doc: dict) -> list[list]:
    """(section, rows of text) for a plain renderer: the CLI prints each section's title, then its rows."""
    rec = doc["recovery"]
    cl = rec["commitlog"]
    rows = ["clean shutdown" if rec["shutdown"]["clean"] else
            f"NOT shut down cleanly (abort file, pid {rec['shutdown']['abort_pid']}): abnormal recovery"]
    if cl:
        rows += [f"CommitLog re-checked from file {cl['check_from_file']} (checkCRCOnRecover={cl['check_crc']})",
                 f"valid data ends at {cl['end_offset']} in {cl['stop_file']}: {cl['stop_reason']}"]
        if cl["dropped_bytes"]:
            rows.append(f"{cl['dropped_bytes']} byte(s) of decodable records after it are dropped")
        rows += [f"file {name} is deleted" for name in cl["deleted_files"]]
        rows += [f"refuses to start: {r}" for r in cl["load_refused"]]
    for t in rec["consume_queues"]["truncated"]:
        rows.append(f"ConsumeQueue {t['topic']}/{t['queue_id']} loses {t['units']} unit(s) from queue offset "
                    f"{t['from_queue_offset']}")
    tl = rec["timerlog"]
    if tl:
        if tl["truncated_units"]:
            rows.append(f"TimerLog truncated at {tl['end_offset']}: {len(tl['truncated_units'])} unit(s)")
        rows += [f"TimerLog unit {d['pos']} points past the CommitLog end (CommitLog {d['offset_py']})"
                 for d in tl["dangling_units"]]
    rows += [f"index file {n} is destroyed" for n in rec["index"]["destroyed"]]
    dups = [f"{d['kind']:<11} {d['topic']} {d['uniq_key']} keys={' '.join(d['keys'])} delivered at offset "
            f"{d['delivered_offset']}: {d['reason']}" for d in doc["duplicates"]]
    late = [f"delay level {lv['level']}: {lv['overdue']} overdue (by up to {lv['overdue_by_ms']} ms, "
            f"{lv['delivered_before']} delivered before), backlog {lv['backlog']} from offset {lv['restart_offset']}, "
            f"goes out at {lv['goes_out_ms']}" if lv["configured"] else
            f"delay level {lv['level']}: not in messageDelayLevel, {lv['never_delivered']} message(s) never delivered "
            f"(backlog from offset {lv['restart_offset']})" for lv in doc["late"]["delay_levels"]]
    wheel = doc["late"]["timer"]
    if wheel.get("present"):
        late.append(f"timer wheel: {wheel['pending']} pending, {wheel['overdue']} overdue, read again from "
                    f"{wheel['restart_read_time_ms']}")
        late += [f"timer slot {s['slot_ms']}: {s['uniq_key']} is skipped (older than the wheel holds)"
                 for s in wheel["skipped"]]
    tx = [f"check: {r['uniq_key']} {r['reason']}" for r in doc["rechecks"]]
    tx += [f"first rounds: {t['uniq_key']} ({t['state'].replace('_', ' ')}) checked at {t['next_check_ms']}"
           for t in doc["transactions"]["first_rounds"]]
    tx += [f"discard: {t['uniq_key']} {_either(t['discard_outcomes'])} ({t['discard_reason']})"
           for t in doc["transactions"]["to_discard"]]
    out = [["recovery", rows], [f"duplicates ({len(dups)})", dups], ["late and due", late], ["transactions", tx]]
    rp = doc["replay"]
    if rp is not None:
        out.append([f"replay {rp['from_ms']} -> {rp['until_ms']} ({rp['events']} events)",
                    [f"{k}: {n}" for k, n in rp["counts"].items()]
                    + [f"delivered again: {e['topic']} {e['uniq_key']} at {e['time']}" for e in rp["delivered_again"]]])
    return out
