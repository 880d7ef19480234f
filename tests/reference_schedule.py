"""The reference model of the delay levels: the per-message walk of `DeliverDelayedMessageTimerTask`,
one unit at a time, every re-put a `SimMessage` through `StoreModel.append` (`ScheduleService._deliver`).
The library's `_deliver_due` must write the same event log, byte for byte (`test_batch_schedule*.py`)."""

from mqtool.formats.names import (
    RMQ_SYS_SCHEDULE_TOPIC,
    RMQ_SYS_TRANS_HALF_TOPIC,
)
from mqtool.rules.schedule import (
    DELAY_FOR_A_WHILE,
    correct_delay_offset,
    correct_deliver_timestamp,
    delay_level_2_queue_id,
    offset_after_failed_put,
)
from mqtool.simulate.schedule import NOT_AN_INT, ScheduleService, _time_up


class ReferenceSchedule(ScheduleService):
    """`ScheduleService` with each level walked unit by unit."""

    def _level(self, level: int, offset: int):
        ctx, m = self.ctx, self.ctx.model
        qid = delay_level_2_queue_id(level)
        delay = self.delays[level]
        while True:
            now = ctx.engine.now
            self.grid[level] = now
            lo, hi = m.cq_min(RMQ_SYS_SCHEDULE_TOPIC, qid), m.cq_max(RMQ_SYS_SCHEDULE_TOPIC, qid)
            offset = correct_delay_offset(offset, lo, hi)
            if offset >= hi:
                yield None
                continue
            next_offset = offset
            wait_until = None
            failed = False
            clock = ctx.clock()
            for off, (phys, _size, tags) in m.cq_units(RMQ_SYS_SCHEDULE_TOPIC, qid, offset, hi):
                deliver = correct_deliver_timestamp(clock, tags, delay)
                next_offset = off + 1
                if deliver > clock:
                    if not ctx.v4:
                        self.offsets[level] = off
                    next_offset = off
                    wait_until = deliver - ctx.clock_offset
                    break
                msg = m.message_once(phys)
                if msg is None:
                    continue
                new = _time_up(msg, msg.props)
                if new is not None and new.topic in (RMQ_SYS_TRANS_HALF_TOPIC, None):
                    continue
                if not self._deliver_one(level, off, msg, new, deliver, clock):
                    failed = True
                    next_offset = offset_after_failed_put(off, ctx.v4)
                    break
            offset = next_offset
            if failed:
                yield DELAY_FOR_A_WHILE
            elif wait_until is not None:
                yield self._next_poll(level, wait_until) - now
            else:
                yield DELAY_FOR_A_WHILE

    def _deliver_one(self, level: int, off: int, msg, new, due: int, clock: int) -> bool:
        """One re-put: async through `_deliver`; sync put at `clock`, its event, the level's offset past it."""
        if new is None:
            return self._deliver(level, off, msg, None, NOT_AN_INT, due)
        if self.ctx.config.enable_schedule_async_deliver:
            return self._deliver(level, off, msg, new, None, due)
        res = self.ctx.model.append(new, clock, "schedule")
        if not res.ok:
            return self._deliver(level, off, msg, new, res, due)  # its put_failed event
        self.offsets[level] = off + 1
        n = res.message
        self._record([(n.topic, n.queue_id, n.uniq_key, msg.phys, n.phys, level, due, n.queue_offset)])
        return True
