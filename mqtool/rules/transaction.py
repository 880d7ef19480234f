"""`TransactionalMessageServiceImpl.check` rules: what a check round does with a half message (spec §7.5).

Read at `rocketmq-all-5.3.1` and `rocketmq-all-4.9.8`
(`broker/.../transaction/queue/TransactionalMessageServiceImpl.java`). Order of a visit:
`need_discard` (which also increments TRANSACTION_CHECK_TIMES in memory), then `need_skip`, then
"fresh stored" (stored after the round started: the round stops), then the immunity (`immunity`,
`check_prepare_queue_offset`), then `is_need_check`. `check_visit` is that order as ONE decision per
half message; the simulator (per message and batch-wise), the views, trace and audit take it from
there, and `predict_rounds` walks a half queue's coming rounds with it (the views' predictions).
`put_check_times` is the only writer of TRANSACTION_CHECK_TIMES (`needDiscard`'s `putUserProperty`,
which `renewHalfMessageInner` copies into a put-back).

The versions decide each visit alike (5.3.1 adds the slave-acting-master escape, which an offline
store never takes). They differ where a round reads more op records (`READ_MORE`): 5.3.1 sleeps 1 s
(SLEEP_WHILE_NO_OP) when none come, 4.9.8 reads on at once; and on 4.9.8 whether a round's put-back
copy is visited in that same round depends on the reput dispatch winning a race (`discard_outcomes`).
"""

from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import NamedTuple

from mqtool.formats.names import PROPERTY_TRANSACTION_CHECK_TIMES
from mqtool.rules.java import parse_int, parse_long

MAX_PREDICTED_ROUNDS = 1000
MAX_REACHED = "TRANSACTION_CHECK_TIMES reached transactionCheckMax"  # a prediction's discard reasons
SKIPPED = "older than fileReservedTime"

# immunity outcomes
PUT_BACK = "put_back"  # CHECK_IMMUNITY_TIME_IN_SECONDS set and still immune: re-put, no check request
NEW_ARRIVED = "new_arrived"  # no property, 0 <= age < transactionTimeOut: the round stops here

# what one visit of `check` decides for a half message (`check_visit`)
DONE = "done"  # an op record covers it (removeMap, or an immune copy's TRAN_PREPARED_QUEUE_OFFSET): go on
DISCARD = "discard"  # needDiscard: resolveDiscardMsg, TRANSACTION_CHECK_TIMES left as it is; go on
SKIP = "skip"  # needSkip: resolveDiscardMsg with the incremented count; go on
FRESH = "fresh"  # stored after the round started: the round stops here
CHECK = "check"  # isNeedCheck: putBackHalfMsgQueue (renewHalfMessageInner) and a check request; go on
READ_MORE = "read_more"  # not yet due: read more op records, then visit the same half again
STOPS_ROUND = frozenset((FRESH, NEW_ARRIVED))


def get_int(text: str | None) -> int:
    """`TransactionalMessageServiceImpl.getInt`: `Integer.parseInt`, -1 when it throws."""
    v = parse_int(text)
    return -1 if v is None else v


def get_long(text: str | None) -> int:
    """`TransactionalMessageServiceImpl.getLong`: `Long.parseLong`, -1 when it throws."""
    v = parse_long(text)
    return -1 if v is None else v


@lru_cache(maxsize=4096)
def need_discard(check_times: str | None, transaction_check_max: int) -> tuple[bool, int | None]:
    """`TransactionalMessageServiceImpl.needDiscard`: (discard?, TRANSACTION_CHECK_TIMES put in memory).

    Absent: 1. Present: `getInt` (unparsable = -1); >= transactionCheckMax discards (the property is
    left as it is: None), else it is incremented (so an unparsable value becomes 0).
    """
    if check_times is None:
        return False, 1
    n = get_int(check_times)
    if n >= transaction_check_max:
        return True, None
    return False, n + 1


def need_skip(now: int, born_timestamp: int, file_reserved_time_h: int) -> bool:
    """`TransactionalMessageServiceImpl.needSkip`: born more than fileReservedTime hours ago."""
    return now - born_timestamp > file_reserved_time_h * 3600 * 1000


@lru_cache(maxsize=4096)
def check_immunity_time(check_immunity_time_str: str | None, transaction_timeout: int) -> int:
    """`checkImmunityTime` of a visit: transactionTimeOut, or `getImmunityTime` of the property.

    `getImmunityTime`: `getLong(seconds)` x 1000; an unparsable value (-1) means transactionTimeOut.
    """
    if check_immunity_time_str is None:
        return transaction_timeout
    v = get_long(check_immunity_time_str)
    return transaction_timeout if v == -1 else v * 1000


def immunity(age_ms: int, immunity_ms: int, has_property: bool) -> str | None:
    """The immunity block of `check`: PUT_BACK, NEW_ARRIVED or None (go on to `is_need_check`).

    With CHECK_IMMUNITY_TIME_IN_SECONDS and age < immunity the half goes to
    `checkPrepareQueueOffset` (re-put with TRAN_PREPARED_QUEUE_OFFSET, or done when its op is
    known); without it, 0 <= age < immunity stops the round ("New arrived").
    """
    if has_property:
        return PUT_BACK if age_ms < immunity_ms else None
    return NEW_ARRIVED if 0 <= age_ms < immunity_ms else None


def is_need_check(age_ms: int, immunity_ms: int, newest_op_born: int | None, round_start: int,
                  transaction_timeout: int) -> bool:
    """`isNeedCheck` in `check`: put the half back and send a check request?

    (no op records read and older than the immunity) or (the newest op record read was born more
    than transactionTimeOut after the round started) or born in the future (age <= -1).
    """
    return ((newest_op_born is None and age_ms > immunity_ms)
            or (newest_op_born is not None and newest_op_born - round_start > transaction_timeout)
            or age_ms <= -1)


def odd_check_settings(transaction_check_max: int, transaction_timeout: int) -> list[str]:
    """What the check does with settings it runs with, though not as their names say (a warning each)."""
    out = []
    if transaction_check_max < 1:
        out.append(f"transactionCheckMax={transaction_check_max}: needDiscard compares TRANSACTION_CHECK_TIMES with "
                   "it, so a half without the property is checked once (count 1) and that copy is discarded at its "
                   "visit, and a half with any count is discarded without a check")
    if transaction_timeout < 0:
        out.append(f"transactionTimeOut={transaction_timeout}: no half is 'new arrived' and every one is past its "
                   "immunity: the first round reaching a half sends its check request, however young it is")
    return out


def op_body_offsets(body: str, v4: bool) -> list[int]:
    """The half queue offsets `fillOpRemoveMap` takes from an op record's body (tag `d`).

    5.3.1: `body.split(",")` (Java drops the trailing empty strings), `getLong` of each; 4.9.8: `getLong`
    of the whole body (one offset per op record, so a 5.x body "0,1," names none). An unparsable part is
    -1, below every miniOffset: left out, as is any negative value.
    """
    parts = [body] if v4 else body.split(",")
    while not v4 and parts and parts[-1] == "":
        parts.pop()
    return [v for v in (get_long(part) for part in parts) if v >= 0]


def check_times_of(props: dict[str, str]) -> str | None:
    """TRANSACTION_CHECK_TIMES as stored (None: absent): what `needDiscard` reads."""
    return props.get(PROPERTY_TRANSACTION_CHECK_TIMES)


def put_check_times(props: dict[str, str], check_times: int | str) -> dict[str, str]:
    """`needDiscard`'s `msgExt.putUserProperty(TRANSACTION_CHECK_TIMES, ...)`: a copy of `props` with the
    count a visit put in memory (kept in its place when present, else last). `renewHalfMessageInner` and
    `resolveDiscardMsg` copy this map into the put-back or the discarded record; nothing else writes it."""
    return {**props, PROPERTY_TRANSACTION_CHECK_TIMES: str(check_times)}


def check_prepare_queue_offset(prepared_queue_offset: str | None, removed) -> str | None:
    """`checkPrepareQueueOffset` for an immune half: DONE when the op of its TRAN_PREPARED_QUEUE_OFFSET is
    in removeMap (`removed`), PUT_BACK (`putImmunityMsgBackToHalfQueue`) when it is not or the property is
    absent, None when the property does not parse (`getLong` -1: returns false, `check` goes on to
    `isNeedCheck`)."""
    if prepared_queue_offset is None:
        return PUT_BACK
    v = get_long(prepared_queue_offset)
    if v == -1:
        return None
    return DONE if v in removed else PUT_BACK


def check_visit(check_times: str | None, born_timestamp: int, store_timestamp: int,
                check_immunity_time_str: str | None, prepared_queue_offset: str | None, removed, now: int,
                round_start: int, newest_op_born: int | None, transaction_timeout: int, transaction_check_max: int,
                file_reserved_time_h: int) -> tuple[str, int | None]:
    """One visit of a half message in `TransactionalMessageServiceImpl.check` (5.3.1 and 4.9.8), once it is
    read: (decision, TRANSACTION_CHECK_TIMES `needDiscard` put in memory; None after a DISCARD).

    `needDiscard` || `needSkip` -> DISCARD / SKIP; stored at or after `round_start` -> FRESH; the immunity
    (`immunity`, `check_prepare_queue_offset`) -> PUT_BACK, DONE or NEW_ARRIVED; `isNeedCheck` -> CHECK,
    else READ_MORE. `removed` is removeMap's keys (the half offsets the op records read so far cover);
    `newest_op_born` the bornTimestamp of the last op record of the last pull (None: it found none).
    """
    discard, times = need_discard(check_times, transaction_check_max)
    if discard:
        return DISCARD, None
    if need_skip(now, born_timestamp, file_reserved_time_h):
        return SKIP, times
    if store_timestamp >= round_start:
        return FRESH, times
    age = now - born_timestamp
    immunity_ms = check_immunity_time(check_immunity_time_str, transaction_timeout)
    state = immunity(age, immunity_ms, check_immunity_time_str is not None)
    if state == NEW_ARRIVED:
        return NEW_ARRIVED, times
    if state == PUT_BACK:
        put = check_prepare_queue_offset(prepared_queue_offset, removed)
        if put is not None:
            return put, times
    if is_need_check(age, immunity_ms, newest_op_born, round_start, transaction_timeout):
        return CHECK, times
    return READ_MORE, times


@dataclass(frozen=True)
class CheckPrediction:
    """When the check rounds will first send a check request for a transaction, and when they discard it."""

    next_check_ms: int | None
    discard_ms: int | None
    checks_before_discard: int
    discard_reason: str | None

    def as_dict(self) -> dict:
        return asdict(self)


def calculate_op_offset(done_op_offsets: list[int], old_offset: int) -> int:
    """The op queue's next offset after a check round (`calculateOpOffset`): over the done op records that
    follow `old_offset` one by one, sorted; the first that is not the next offset stops it, a repeated one
    too (an op record done twice, through `checkPrepareQueueOffset` and its last half, holds the offset)."""
    new_offset = old_offset
    for done in sorted(done_op_offsets):
        if done != new_offset:
            break
        new_offset += 1
    return new_offset


def next_round_visits(queue_offsets: list[int], half_offset: int | None, removed) -> list[int]:
    """The queue offsets (of a half and its copies) the next `check` round reads: its walk starts at the
    persisted halfOffset (CID_RMQ_SYS_TRANS; absent: the queue's min, taken as 0 here) and passes over
    the offsets removeMap holds (`removed`: the half offsets the op records cover). A half none of whose
    records is visited is never checked again."""
    start = half_offset or 0
    return [q for q in queue_offsets if q >= start and q not in removed]


def discard_outcomes(discard_ms: int | None, discard_reason: str | None, check_times: str | None,
                     transaction_check_max: int, check_interval: int, v4: bool) -> list[int]:
    """The times at which `predict_rounds`' discard may happen, earliest first.

    A half whose stored count already reached the max is discarded at its first visit: one time. Else
    the discard is of the copy a round put back, visited again in that round: 5.3.1 does so (pair_default);
    on 4.9.8 only when the reput service has dispatched the copy before the walk reaches it, otherwise
    NO_NEW_MSG ends the round and the next round discards it (pair-4.9's README: its recorded run
    discarded in the same round, three other runs one round later).
    The store does not decide that race: both times.
    """
    if discard_ms is None:
        return []
    if v4 and discard_reason == MAX_REACHED and not need_discard(check_times, transaction_check_max)[0]:
        return [discard_ms, discard_ms + check_interval]
    return [discard_ms]


class HalfRecord(NamedTuple):
    """What `check` reads of one record of the half queue (an original or a put-back copy)."""

    key: str  # the transaction it belongs to (UNIQ_KEY, or where the original is)
    check_times: str | None  # TRANSACTION_CHECK_TIMES
    born_timestamp: int
    store_timestamp: int
    check_immunity_time_str: str | None  # CHECK_IMMUNITY_TIME_IN_SECONDS
    prepared_queue_offset: str | None  # TRAN_PREPARED_QUEUE_OFFSET


def predict_rounds(records: dict[int, HalfRecord], half_offset: int | None, ops: dict[int, list[int]],
                   op_offset: int | None, answered: set[str], now: int, check_interval: int,
                   transaction_timeout: int, transaction_check_max: int, file_reserved_time_h: int,
                   sleep_while_no_op: bool = True, max_rounds: int = MAX_PREDICTED_ROUNDS,
                   max_visits: int = 2_000_000, fast: bool = True) -> dict[str, CheckPrediction]:
    """One half queue's check rounds from `now`, `check_visit` per record from `half_offset` (`records` by
    queue offset; `ops`: the op queue's records by queue offset, each the half offsets its body names, read
    from `op_offset`). Per transaction: its first check request, its first discard (or skip), the checks
    before it.

    As `TransactionalMessageCheckService` runs it: a round starts `check_interval` after the previous one
    ended; `fillOpRemoveMap` puts the op records' half offsets (those at or past halfOffset) in removeMap,
    and an op record is done once the walk passed all of them (`calculateOpOffset` moves the op offset
    over done ones). When the round read op records, the first half due for `isNeedCheck` is READ_MORE:
    more op records are read, none come, and 5.3.1 sleeps 1 s (`sleep_while_no_op`; 4.9.8 goes on at once)
    before it visits the half again. A CHECK or PUT_BACK appends a copy (`renewHalfMessageInner` with the
    count `needDiscard` put; an immunity copy also gets TRAN_PREPARED_QUEUE_OFFSET) at the queue's end,
    which the same round reads (discarded there at the max, else "fresh stored" stops the round: an
    earlier transaction's copy can hold a later one's back a round). A transaction in `answered` gets its
    producer's answer before the next round: an op record covering the checked copy. No other op record
    comes. READ_MORE without op records (a half exactly as old as its immunity) is taken as a check.
    `fast`: after a round that only checked (no op record, nothing answered), the rounds that would do the
    same again with every count one higher are counted at once (`_steady_rounds`; tests prove it equal).
    """
    out: dict[str, list] = {}  # key -> [next_check, discard, checks, reason]
    end = max(records, default=-1) + 1
    records, ops = dict(records), {q: list(v) for q, v in ops.items()}
    op_end = max(ops, default=-1) + 1
    offset, op_offset = half_offset or 0, op_offset or 0
    clock, visits, rounds = now, 0, 0
    while rounds < max_rounds:
        rounds += 1
        if offset >= end or visits >= max_visits:
            break
        start = clock = clock + check_interval
        remove, left, done = _fill_op_remove_map(ops, op_offset, op_end, offset)
        ops_read = any(q in ops for q in range(op_offset, op_end))
        steady, first_new, i = fast and not ops_read and not remove, end, offset
        while i < end and visits < max_visits:
            if i in remove:
                q = remove.pop(i)
                left[q].discard(i)
                if not left[q]:
                    done.add(q)
                i += 1
                continue
            r = records.get(i)
            if r is None:  # an unreadable unit: the broker's walk goes on at the next offset
                i += 1
                continue
            visits += 1
            key, check_times, born, _, immunity_str, prepared = r
            decision, times = check_visit(check_times, born, r.store_timestamp, immunity_str, prepared, remove,
                                          clock, start, start if ops_read else None, transaction_timeout,
                                          transaction_check_max, file_reserved_time_h)
            if decision == FRESH or decision == NEW_ARRIVED:
                steady = steady and decision == FRESH and i == first_new
                break
            if decision != CHECK or key in answered:
                steady = False
            if decision == READ_MORE and ops_read:
                ops_read = False  # read to the end of the op queue: NO_NEW_MSG, the pull holds no records now
                clock += SLEEP_WHILE_NO_OP if sleep_while_no_op else 0
                continue
            p = out.get(key)
            if p is None:
                p = out[key] = [None, None, 0, None]
            if decision == CHECK or decision == READ_MORE:  # READ_MORE without op records: due once older
                records[end] = HalfRecord(key, str(times), born, clock, immunity_str, prepared)
                if p[1] is None:
                    p[0] = p[0] or clock
                    p[2] += 1
                if key in answered:
                    ops[op_end] = [end]
                    op_end += 1
                end += 1
            elif decision == DISCARD or decision == SKIP:
                if p[1] is None:
                    p[1], p[3] = clock, MAX_REACHED if decision == DISCARD else SKIPPED
            elif decision == DONE:
                done.add(remove.pop(get_long(prepared)))
            else:  # PUT_BACK
                records[end] = HalfRecord(key, str(times), born, clock, immunity_str, prepared or str(i))
                end += 1
            del records[i]  # the walk never comes back below its offset
            i += 1
        else:
            steady = False  # the walk did not stop at the first copy it wrote
        offset = i
        op_offset = calculate_op_offset(list(done), op_offset)
        if steady:
            m = min(_steady_rounds(records, offset, end, clock, check_interval, transaction_timeout,
                                   transaction_check_max, file_reserved_time_h), max_rounds - rounds)
            if m > 0:
                n = end - offset
                live = [records.pop(j) for j in range(offset, end)]
                clock += m * check_interval
                offset, end = offset + m * n, end + m * n
                for j, r in enumerate(live):
                    records[offset + j] = r._replace(check_times=str(int(r.check_times) + m), store_timestamp=clock)
                    p = out[r.key]
                    if p[1] is None:
                        p[2] += m
                visits += m * n
                rounds += m
    return {key: CheckPrediction(*p) for key, p in out.items()}


def _steady_rounds(records: dict[int, HalfRecord], offset: int, end: int, clock: int, check_interval: int,
                   transaction_timeout: int, transaction_check_max: int, file_reserved_time_h: int) -> int:
    """How many rounds after one that checked every record it read and stopped at the first copy it wrote
    ("fresh stored") do the same: each copy [offset, end) is checked again with a count one higher, as long
    as no count reaches transactionCheckMax - 1 (the copy would be discarded in its round), no half
    becomes older than fileReservedTime, and every half stays past its immunity."""
    if check_interval <= 0:
        return 0
    live = [records[j] for j in range(offset, end)]
    if not live or any(r.prepared_queue_offset is not None for r in live):
        return 0
    nxt = clock + check_interval
    if any(nxt - r.born_timestamp <= check_immunity_time(r.check_immunity_time_str, transaction_timeout)
           for r in live):
        return 0
    counts = [get_int(r.check_times) for r in live]
    by_count = transaction_check_max - 1 - max(counts)
    by_age = (file_reserved_time_h * 3600 * 1000 + min(r.born_timestamp for r in live) - clock) // check_interval
    return max(0, min(by_count, by_age))


SLEEP_WHILE_NO_OP = 1000  # ms, 5.3.1's sleep when a READ_MORE finds no further op record


def _fill_op_remove_map(ops: dict[int, list[int]], op_offset: int, op_end: int,
                        mini_offset: int) -> tuple[dict[int, int], dict[int, set[int]], set[int]]:
    """`fillOpRemoveMap` over every op record from `op_offset`: (removeMap: half offset -> op offset, the half
    offsets each op record still waits for, the op records done already: none of theirs at or past
    `mini_offset`, or an empty/unknown body)."""
    remove: dict[int, int] = {}
    left: dict[int, set[int]] = {}
    done: set[int] = set()
    for q in range(op_offset, op_end):
        offs = {o for o in ops.get(q, ()) if o >= mini_offset}
        if q in ops and offs:
            left[q] = offs
            for o in offs:
                remove[o] = q
        else:
            done.add(q)
    return remove, left, done
