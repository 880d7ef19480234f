"""`TransactionalMessageServiceImpl.check` rules: what a check round does with a half message (spec §7.5).

Read at `rocketmq-all-5.3.1` and `rocketmq-all-4.9.8`
(`broker/.../transaction/queue/TransactionalMessageServiceImpl.java`); the rules below are the
same in both (the versions differ in how a round waits for op records, a simulator matter).
Order of a visit: `need_discard` (which also increments TRANSACTION_CHECK_TIMES in memory), then
`need_skip`, then "fresh stored" (stored after the round started: the round stops), then the
immunity (`immunity`), then `is_need_check`.
"""

from dataclasses import asdict, dataclass

from mqtool.rules.java import parse_int, parse_long

MAX_PREDICTED_ROUNDS = 1000

# immunity outcomes
PUT_BACK = "put_back"  # CHECK_IMMUNITY_TIME_IN_SECONDS set and still immune: re-put, no check request
NEW_ARRIVED = "new_arrived"  # no property, 0 <= age < transactionTimeOut: the round stops here


def get_int(text: str | None) -> int:
    """`TransactionalMessageServiceImpl.getInt`: `Integer.parseInt`, -1 when it throws."""
    v = parse_int(text)
    return -1 if v is None else v


def get_long(text: str | None) -> int:
    """`TransactionalMessageServiceImpl.getLong`: `Long.parseLong`, -1 when it throws."""
    v = parse_long(text)
    return -1 if v is None else v


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


@dataclass(frozen=True)
class CheckPrediction:
    """When the check rounds will first send a check request for a half, and when they discard it."""

    next_check_ms: int | None
    discard_ms: int | None
    checks_before_discard: int
    discard_reason: str | None

    def as_dict(self) -> dict:
        return asdict(self)


def predict_checks(check_times: str | None, born_timestamp: int, immunity_ms: int, has_immunity: bool,
                   now: int, check_interval: int, transaction_check_max: int, file_reserved_time_h: int,
                   max_rounds: int = MAX_PREDICTED_ROUNDS) -> CheckPrediction:
    """The next-check prediction: the rules above replayed on check rounds at now + k x interval.

    Round-level: a half past its immunity is checked in the round (when no op record is newer, the
    broker reads more and retries it within the round). A round's put-back copy (check or immunity)
    is visited again in that same round, so it is discarded there once its count reaches the max
    (`needDiscard` runs before the "fresh stored" stop; as the 5.3.1 oracle shows).
    """
    next_check = None
    checks = 0
    for k in range(1, max_rounds + 1):
        t = now + k * check_interval
        discard, new_times = need_discard(check_times, transaction_check_max)
        if discard:
            return CheckPrediction(next_check, t, checks, "TRANSACTION_CHECK_TIMES reached transactionCheckMax")
        if need_skip(t, born_timestamp, file_reserved_time_h):
            return CheckPrediction(next_check, t, checks, "older than fileReservedTime")
        state = immunity(t - born_timestamp, immunity_ms, has_immunity)
        if state == NEW_ARRIVED:
            continue
        check_times = str(new_times)
        if state is None:
            checks += 1
            next_check = next_check or t
        if need_discard(check_times, transaction_check_max)[0]:
            return CheckPrediction(next_check, t, checks, "TRANSACTION_CHECK_TIMES reached transactionCheckMax")
    return CheckPrediction(next_check, None, checks, None)
