"""Consumer groups on the virtual clock: push with send-back (retry, DLQ, drop) and POP with revive.

Push (`ConsumeMessageConcurrentlyService` + the broker's `consumerSendMsgBack`, spec §17): a message is
consumed `consume_delay` after the consumer's next pull (`poll_interval`; 0 = long polling: as it becomes
available); a failed one is sent back at once with the request's maxReconsumeTimes (16 for a default
client, which wins over retryMaxTimes): `mqtool.rules.retry` decides, the record goes to
SCHEDULE_TOPIC_XXXX queue level - 1 (REAL_TOPIC %RETRY%group) for the schedule service to deliver,
or to %DLQ%group queue 0 with DELAY=0; the send-back creates those topics. A refused send-back is consumed
again 5 s later (`submitConsumeRequestLater`). A retry topic starts at offset 0 (`computePullFromWhere`).

POP (5.x only, spec §15): a client sends pop requests (`PopMessageProcessor.processRequest`): each advances
the revive-queue counter, and writes one checkpoint per queue it popped from; the client acks what it
consumed (`appendAck`), both as timer messages for the revive topic. The proxy forwards a popped message
with reconsumeTimes >= retryMaxTimes + 1 to the DLQ and acks it (`PopMessageResultFilterImpl`); a remoting
client acks (drops) those above its maxReconsumeTimes. `PopReviveService` per revive queue scans the queue
in rounds and revives what is not acked into %RETRY%group_topic queue 0.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import replace
from itertools import chain
from operator import attrgetter
from typing import TYPE_CHECKING, NamedTuple

from mqtool.formats import pop as pop_format
from mqtool.formats.commitlog import offset_msg_id
from mqtool.formats.config_json import PERM_READ, PERM_WRITE, GroupConfig, SubscriptionGroups
from mqtool.formats.names import (
    ACK_TAG,
    CK_TAG,
    PROPERTY_KEYS,
    PROPERTY_REAL_QUEUE_ID,
    PROPERTY_REAL_TOPIC,
    PROPERTY_TAGS,
    PROPERTY_TIMER_DELIVER_MS,
    PROPERTY_TIMER_OUT_MS,
    PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX,
    RETRY_GROUP_TOPIC_PREFIX,
    REVIVE_GROUP,
    RMQ_SYS_SCHEDULE_TOPIC,
    TIMER_TOPIC,
)
from mqtool.formats.properties import broker_properties
from mqtool.formats.sysflag import BORNHOST_V6, STOREHOST_V6
from mqtool.rules import pop as pop_rules
from mqtool.rules.retry import (
    DLQ_NUMS_PER_GROUP,
    consumer_send_msg_back,
    get_dlq_topic,
    get_max_reconsume_times,
    get_retry_topic,
    send_back_max_reconsume_times,
    send_back_properties,
)
from mqtool.rules.schedule import compute_deliver_timestamp, delay_level_2_queue_id, transform_delay_level_message
from mqtool.rules.timer import timer_out_ms
from mqtool.simulate.context import SimContext
from mqtool.simulate.engine import NORMAL, Process
from mqtool.simulate.model import SimMessage
from mqtool.simulate.scenario import ConsumerSpec
from mqtool.simulate.service import FIRST_PERSIST_MS, PersistedOffsets, consumer_offset_rows

if TYPE_CHECKING:
    from mqtool.formats.offsets_json import ConsumerOffsets

_HOSTS_V6 = BORNHOST_V6 | STOREHOST_V6
CONSUME_LATER_MS = 5000  # a refused send-back: the client consumes the message again 5 s later
SERVICE = "consumer"
# the ack event is named like its tag; change_invisible: a remoting POP client's new invisible time
KINDS = ("consume", "send_back", "dlq", "drop", "pop", ACK_TAG, "revive", "change_invisible")


def _wake_idle(p: Process | None, delay: int = 0) -> None:
    """Resume a process idle until a message arrives (`yield None`); a sleeping one keeps its time."""
    if p is not None and p.alive and p.wake_time is None:
        p.wake(delay)


class Delivery(NamedTuple):
    """A message a push consumer consumes: the spec it matched and its queue offset."""

    spec: ConsumerSpec
    msg: SimMessage
    queue_offset: int


class Popped(NamedTuple):
    """A message a POP request took: `start` is its checkpoint's start offset, `ck` the checkpoint record and
    `rqid` the request's revive queue (of the checkpoint and of every ack of the message)."""

    group: str
    topic: str
    queue_id: int
    start: int
    offset: int
    msg: SimMessage
    pop_time: int
    ck: SimMessage | None
    rqid: int


class ConsumerService(PersistedOffsets[tuple[str, str, int]]):
    """Every `[[consumers]]` group of a scenario; `offsets` is `ConsumerOffsetManager`'s table, persisted every
    flushConsumerOffsetInterval (first 10 s after the start): after a crash what came after it is consumed again."""

    def __init__(
        self,
        ctx: SimContext,
        specs: list[ConsumerSpec],
        stored_offsets: ConsumerOffsets | None,
        groups: SubscriptionGroups | None,
    ) -> None:
        self.groups = groups.subscription_group_table if groups is not None else {}
        self.config = config = ctx.config
        ip, port = config.broker_ip1, config.listen_port
        self.store_host = f"{ip}:{port}" if ip else None
        self.revive_topic = pop_rules.build_cluster_revive_topic(config.broker_cluster_name)
        if any(s.mode == "pop" for s in specs) and ctx.v4:
            raise ValueError("POP consumption needs a 5.x broker (4.9.8 has no PopReviveService)")
        stored = consumer_offset_rows(stored_offsets)
        super().__init__(ctx, stored, config.flush_consumer_offset_interval, FIRST_PERSIST_MS, "consumer-persist")
        self.by_group: dict[str, list[ConsumerSpec]] = {}
        for s in specs:
            self.by_group.setdefault(s.group, []).append(s)
        self.queue_spec: dict[tuple[str, str, int], ConsumerSpec] = {}  # push: (group, topic, qid) -> its first spec
        self.pop_clients: dict[tuple[str, str], ConsumerSpec] = {}  # pop: (group, topic) -> its first spec
        for s in chain.from_iterable(self.by_group.values()):  # group by group
            if s.mode == "pop":
                self.pop_clients.setdefault((s.group, s.topic), s)
                continue
            retry, nums = get_retry_topic(s.group), self.group_config(s.group).retry_queue_nums
            queues = [(s.topic, q) for q in ctx.model.queue_ids(s.topic) or [0]]
            for topic, qid in queues + [(retry, q) for q in range(max(1, nums))]:  # the retry topic: one queue at least
                self.queue_spec.setdefault((s.group, topic, qid), s)
        self.walkers: dict[tuple[str, str, int], Process] = {}
        self.started_at = ctx.engine.now
        # createTopicInSendMessageBackMethod / the revive's retry topic: (topic, queue nums, perm, time) in call
        # order; `--out` adds those topics.json lacks, one dataVersion step each
        self.topic_requests: list[tuple[str, int, int, int]] = []
        self.next_unit: dict[tuple[str, str, int], int] = {}
        self.gen = 0
        self.counts: dict[str, Counter] = {g: Counter() for g in self.by_group}
        for key in self.queue_spec:
            _group, topic, qid = key
            ctx.model.on_append(topic, qid, lambda k=key: self._on_append(k))
        self.pop = PopClients(self)
        self.revive = PopRevive(self)

    # ----- settings per group -----
    def group_config(self, group: str) -> GroupConfig:
        """`findSubscriptionGroupConfig`: the store's settings of the group, else the defaults a group the broker
        creates on its first request gets (retryMaxTimes 16, retryQueueNums 1)."""
        return self.groups.get(group) or GroupConfig(group)

    def _initial(self, key: tuple[str, str, int], spec: ConsumerSpec) -> int:
        """The committed offset, else where the spec starts (a retry topic at its first unit)."""
        _group, topic, qid = key
        if key in self.offsets:
            return self.offsets[key]
        if topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or spec.start == "first":
            return self.ctx.model.cq_min(topic, qid)
        return self.ctx.model.cq_max(topic, qid) if spec.start == "last" else int(spec.start)

    # ----- life cycle -----
    def start(self) -> None:
        self.gen += 1
        eng = self.ctx.engine
        self.started_at = eng.now
        for key, spec in self.queue_spec.items():
            group, topic, qid = key
            self.next_unit[key] = self._initial(key, spec)
            self.walkers[key] = eng.process(self._walk(key), NORMAL, 0, f"consumer-{group}-{topic}-{qid}")
        self.pop.start()
        self.start_persister()
        self.revive.start()

    def stop(self, clean: bool) -> None:
        self.gen += 1  # consumptions already scheduled never happen
        for p in [*self.walkers.values(), *self.pop.poppers.values(), *self.revive.revivers.values()]:
            p.stop()
        self.stop_persister(clean)

    def _on_append(self, key) -> None:
        """A new message waits for the consumer's next pull: none with long polling, else the next tick of
        its `poll_interval` grid (the first pull is at the start)."""
        poll = self.queue_spec[key].poll_interval_ms
        _wake_idle(self.walkers.get(key), 0 if poll <= 0 else -(self.ctx.engine.now - self.started_at) % poll)

    # ----- push: walk a queue, deliver what it holds in runs consume_delay later -----
    def _walk(self, key):
        """The consumer's pulls: each takes every unit up to the queue's max; those of one consume_delay are
        delivered together, in queue order (`_deliver`)."""
        m = self.ctx.model
        group, topic, qid = key
        while True:
            runs: dict[int, list[Delivery]] = {}
            for o, (phys, _size, _tags) in m.cq_units(topic, qid, self.next_unit[key], m.cq_max(topic, qid)):
                self.next_unit[key] = o + 1
                msg = m.message(phys)
                if msg is None:
                    continue
                spec = self._spec(group, msg)
                if spec is None:
                    self._commit(key, o)
                else:
                    runs.setdefault(spec.consume_delay_ms, []).append(Delivery(spec, msg, o))
            for delay, run in runs.items():
                self.ctx.engine.schedule(lambda r=run, g=self.gen: self._deliver(g, key, r), NORMAL, delay)
            yield None

    def _deliver(self, gen: int, key, run: list[Delivery]) -> None:
        """Consume a run of messages due now, one after the other. An event a consumption queued for now at a
        higher rank (a watcher's crash, a woken service) cuts the run: it goes first, the rest right after
        it, as between two single deliveries."""
        eng = self.ctx.engine
        for i, d in enumerate(run):
            if i and eng.outranked(NORMAL):
                eng.schedule_next(lambda rest=run[i:]: self._deliver(gen, key, rest), NORMAL)
                return
            if gen != self.gen or not self.ctx.running:
                return
            self._consume(key, d)

    def _spec(self, group: str, msg: SimMessage) -> ConsumerSpec | None:
        p = msg.props
        keys = p.get(PROPERTY_KEYS, "").split(" ") if p.get(PROPERTY_KEYS) else []
        for s in self.by_group[group]:
            if s.matches(keys, msg.uniq_key, p.get(PROPERTY_TAGS)):
                return s
        return None

    def _commit(self, key, queue_offset: int) -> None:
        if self.offsets.get(key, -1) < queue_offset + 1:
            self.offsets[key] = queue_offset + 1

    def _emit(self, event: str, group: str, msg: SimMessage, new=None, /, at=None, **detail) -> None:
        """An event about a group's message, on its own queue or on `at` (topic, queue id: where a send-back or
        revive wrote `new`)."""
        self.counts[group][event] += 1
        topic, queue_id = at or (msg.topic, msg.queue_id)
        nphys = new.phys if new else None
        self.ctx.log.batch(
            self.ctx.engine.now, SERVICE, event, topic, queue_id, msg.uniq_key, msg.phys, nphys, group=group, **detail
        )

    def _consume(self, key, d: Delivery) -> None:
        group, _topic, _qid = key
        spec, msg = d.spec, d.msg
        fails = spec.fails(msg.reconsume_times)
        outcome = "fail" if fails else "ok"
        self._emit(
            "consume", group, msg, queue_offset=d.queue_offset, reconsume_times=msg.reconsume_times, outcome=outcome
        )
        limit = send_back_max_reconsume_times(
            self.group_config(group).retry_max_times, get_max_reconsume_times(spec.max_reconsume_times)
        )
        if fails and not self._send_back(group, msg, limit):
            run, g = [Delivery(spec, replace(msg, reconsume_times=msg.reconsume_times + 1), d.queue_offset)], self.gen
            self.ctx.engine.schedule(lambda: self._deliver(g, key, run), NORMAL, CONSUME_LATER_MS)
        self._commit(key, d.queue_offset)

    # ----- consumerSendMsgBack -----
    def _send_back(self, group: str, msg: SimMessage, max_times: int, delay_level: int = 0) -> bool:
        ctx = self.ctx
        nums = self.group_config(group).retry_queue_nums
        d = consumer_send_msg_back(group, msg.reconsume_times, max_times, nums, delay_level)
        if d.action == "drop":
            self._emit("drop", group, msg, reason="retryQueueNums <= 0")
            return True
        rw, now = PERM_READ | PERM_WRITE, ctx.clock()
        self.topic_requests.append((get_retry_topic(group), nums, rw, now))  # created before the DLQ decision
        if d.action == "dlq":
            self.topic_requests.append((get_dlq_topic(group), DLQ_NUMS_PER_GROUP, rw, now))
        props = send_back_properties(msg.props, msg.topic, offset_msg_id(msg.store_host, msg.phys), d)
        if d.action == "dlq":
            new, event, detail = msg.derive(d.topic, 0, props), "dlq", {"at": (d.topic, 0)}
        else:  # parked on SCHEDULE_TOPIC_XXXX (`transformDelayLevelMessage`), due at its level's time
            levels, qid = ctx.config.delay_levels_ms(), ctx.rng.randrange(nums) if nums > 1 else 0
            props, level = transform_delay_level_message(props, d.topic, qid, len(levels), not ctx.v4)
            new = msg.derive(RMQ_SYS_SCHEDULE_TOPIC, delay_level_2_queue_id(level), props)
            new.tags_code = compute_deliver_timestamp(level, now, levels)
            event, detail = "send_back", {"at": (d.topic, qid), "level": level, "due": new.tags_code}
        new.reconsume_times = msg.reconsume_times + 1
        # 5.3.1 writes the broker's own address, 4.9.8 the original's; an IPv6 record keeps its own (the
        # copied sysFlag says STOREHOST_V6, which the put never clears)
        if self.store_host and not ctx.v4 and not msg.sys_flag & STOREHOST_V6:
            new.store_host = self.store_host
        res = ctx.put(new, SERVICE)
        if not res.ok:
            self._emit("put_failed", group, msg, status=res.status, next="consume again in 5 s")
            return False
        self._emit(event, group, msg, new, **detail, reconsume_times=new.reconsume_times)
        return True

    # ----- results -----
    def summary(self) -> dict[str, dict[str, int]]:
        return {g: {k: c.get(k, 0) for k in KINDS} for g, c in sorted(self.counts.items())}


class PopClients:
    """The POP clients of a `ConsumerService` (`PopMessageProcessor`, the client's ack or change of invisible
    time); offsets, events and send-backs are the service's."""

    def __init__(self, svc: ConsumerService) -> None:
        self.svc = svc
        self.ctx = ctx = svc.ctx
        self.ck_counter = 0  # PopMessageProcessor.ckMessageNumber
        self.request_rqid: dict[tuple[str, str], int] = {}  # per client: its last request's revive queue
        # the broker's per-request draws, kept apart from ctx.rng so that other services' draws stay as they were
        self.pop_rng = random.Random(ctx.rng.getrandbits(64)) if svc.pop_clients else None
        self.poppers: dict[tuple[str, str], Process] = {}
        for group, topic in svc.pop_clients:  # a long-polling pop request is answered when a message arrives
            retry = pop_rules.build_pop_retry_topic(topic, group, svc.config.enable_retry_topic_v2)
            for t, q in [(topic, q) for q in ctx.model.queue_ids(topic) or [0]] + [(retry, 0)]:
                ctx.model.on_append(t, q, lambda k=(group, topic): _wake_idle(self.poppers.get(k)))

    def start(self) -> None:
        for key in self.svc.pop_clients:
            group, topic = key
            self.poppers[key] = self.ctx.engine.process(self._loop(key), NORMAL, 0, f"consumer-pop-{group}-{topic}")

    def _loop(self, key):
        """The client's POP requests: one every `poll_interval`, or (0) long polling: a request that found nothing
        waits for a message (counted once), one that found some is followed by the next at once."""
        spec = self.svc.pop_clients[key]
        while True:
            got = self._request(key, spec)
            if spec.poll_interval_ms > 0:
                yield spec.poll_interval_ms
                continue
            while not got:
                yield None  # the suspended request, answered when a message arrives
                got = self._request(key, spec, counted=True)

    def _request(self, key, spec: ConsumerSpec, counted: bool = False) -> int:
        """`PopMessageProcessor.processRequest` for one request (queueId -1) and what the client does with the
        answer; the number of messages popped."""
        ctx, m = self.ctx, self.ctx.model
        if not ctx.running:
            return 0
        group, topic = key
        if not counted:  # a new request; a suspended one keeps its revive queue
            self.request_rqid[key] = pop_rules.revive_queue_id(self.ck_counter, self.svc.config.revive_queue_num)
            self.ck_counter += 1
        rqid = self.request_rqid[key]
        random_q = spec.pop_random if spec.pop_random is not None else self.pop_rng.randrange(100)
        retry = pop_rules.build_pop_retry_topic(topic, group, self.svc.config.enable_retry_topic_v2)
        first = pop_rules.need_retry(random_q, ctx.config.pop_from_retry_probability)
        pop_time = ctx.clock()
        room, popped = spec.batch_size, []
        for t in [retry, topic] if first else [topic, retry]:
            if t == retry and not m.queue_ids(retry):  # selectTopicConfig: made by the first revive
                continue
            if t == retry and not first and room <= 0:
                break
            qids = m.queue_ids(t) or [0]
            for qid in pop_rules.pop_queue_ids(random_q, max(qids) + 1):
                if room > 0:
                    popped += self._pop_queue((group, t, qid), spec, room, pop_time, rqid)
                    room = spec.batch_size - len(popped)
        for p in popped:
            self._answer(p, spec)
        return len(popped)

    def _pop_queue(self, qkey, spec: ConsumerSpec, room: int, pop_time: int, rqid: int) -> list[Popped]:
        """`popMsgFromQueue`: up to `room` messages from the group's offset (its init offset committed), one
        checkpoint for them (`appendCheckPoint`), the offset moved past them."""
        m = self.ctx.model
        group, topic, qid = qkey
        start = self.svc._initial(qkey, spec)
        self.svc.offsets.setdefault(qkey, start)  # getInitOffset(init = true) commits it
        units = list(m.cq_units(topic, qid, start, min(m.cq_max(topic, qid), start + room)))
        if not units:
            return []
        offsets = [o for o, _unit in units]
        diffs = pop_rules.ck_diffs(start, offsets)
        ck = self._checkpoint(group, topic, qid, start, diffs, pop_time, spec.invisible_time_ms, rqid)
        self.svc._commit(qkey, offsets[-1])
        msgs = [(o, m.message(phys)) for o, (phys, _size, _tags) in units]
        return [Popped(group, topic, qid, start, o, msg, pop_time, ck, rqid) for o, msg in msgs if msg is not None]

    def _checkpoint(self, group: str, topic: str, qid: int, start: int, diffs: list[int], pop_time: int, inv, rqid):
        """`appendCheckPoint`: the checkpoint record of the messages at `start` + `diffs`, in revive queue `rqid`."""
        name = self.svc.config.broker_name
        ck_key = pop_rules.gen_ck_unique_id(topic, qid, start, group, pop_time, name)
        body = pop_format.ck_body(topic, group, qid, start, diffs, pop_time, inv, name)
        return self._revive_record(CK_TAG, body, ck_key, pop_rules.ck_deliver_time(pop_time, inv), rqid)

    def _answer(self, p: Popped, client: ConsumerSpec) -> None:
        """The client's handling of one popped message: the proxy's filter (TO_DLQ: forward, then ack) or the
        remoting client's drop past its maxReconsumeTimes, else the consumption and, when it succeeds, the ack."""
        rt = p.msg.reconsume_times
        spec = self.svc._spec(p.group, p.msg) or client
        self._event(
            "pop",
            p,
            reconsume_times=rt,
            invisible_until=p.pop_time + client.invisible_time_ms,
            revive_queue_id=p.rqid,
            checkpoint=p.ck.phys if p.ck else None,
        )
        if client.client_kind == "proxy":
            limit = spec.max_reconsume_times
            limit = self.svc.group_config(p.group).retry_max_times if limit is None else limit
            if pop_rules.filter_message(rt, limit) == "TO_DLQ":
                self._event("consume", p, reconsume_times=rt, outcome="dlq")
                self.svc._send_back(p.group, p.msg, 0, delay_level=-1)
                self._ack(p, client)
                return
        elif pop_rules.process_pop_result_drops(rt, get_max_reconsume_times(spec.max_reconsume_times)):
            self._event("drop", p, reason="reconsumeTimes above the client's maxReconsumeTimes")
            self._ack(p, client)
            return
        fails = spec.fails(rt)
        self._event("consume", p, reconsume_times=rt, outcome="fail" if fails else "ok")
        if not fails:
            self._ack(p, client)
        elif client.client_kind == "remoting":
            self._consume_later(p, client, spec)

    def _consume_later(self, p: Popped, client: ConsumerSpec, spec: ConsumerSpec) -> None:
        """A remoting client's failed POP message (`processConsumeResult`): the broker's `ChangeInvisibleTimeProcessor`
        writes a checkpoint of the one message (popTime now, same revive queue) and acks the old checkpoint's entry
        (a proxy client just does not ack)."""
        now, limit = self.ctx.clock(), get_max_reconsume_times(spec.max_reconsume_times)
        inv = pop_rules.process_consume_result(p.msg.reconsume_times, limit, now - p.msg.born_ts)
        if inv < 0:
            self._event("drop", p, reason="consumed too many times: acked")
            self._ack(p, client)
            return
        if inv == 0:
            return
        ck = self._checkpoint(p.group, p.topic, p.queue_id, p.offset, [0], now, inv, p.rqid)
        self._event("change_invisible", p, ck, invisible_until=now + inv, revive_queue_id=p.rqid)
        self._ack(p, client, event=False)

    def _ack(self, p: Popped, client: ConsumerSpec, event: bool = True) -> None:
        """`AckMessageProcessor.appendAck` (buffer merge off): one ack record for the message, `so` the
        checkpoint's start, into the checkpoint's revive queue at popTime + invisibleTime."""
        name = self.svc.config.broker_name
        ack_key = pop_rules.gen_ack_unique_id(p.topic, p.queue_id, p.offset, p.group, p.pop_time, name)
        body = pop_format.ack_body(p.topic, p.group, p.queue_id, p.start, p.offset, p.pop_time, name)
        deliver = pop_rules.ack_deliver_time(p.pop_time, client.invisible_time_ms)
        ack = self._revive_record(ACK_TAG, body, ack_key, deliver, p.rqid)
        if event:  # a changeInvisibleTime's ack of the old checkpoint is no ack of the message
            self._event(ACK_TAG, p, ack, revive_queue_id=p.rqid)

    def _event(self, event: str, p: Popped, new: SimMessage | None = None, **detail) -> None:
        """An event about a popped message, on the queue it was popped from, with its queue offset."""
        self.svc._emit(event, p.group, p.msg, new, at=(p.topic, p.queue_id), queue_offset=p.offset, **detail)

    def _revive_record(self, tag: str, body: bytes, uniq: str, deliver: int, rqid: int) -> SimMessage | None:
        """A checkpoint or ack as `putMessageToSpecificQueue` stores it: through the timer hook
        (`transformTimerMessage`: TIMER_OUT_MS rounded to the precision, REAL_TOPIC/REAL_QID) unless due."""
        ctx = self.ctx
        props = {
            PROPERTY_TAGS: tag,
            PROPERTY_TIMER_DELIVER_MS: str(deliver),
            PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX: uniq,
        }
        now = ctx.clock()
        topic, qid = self.svc.revive_topic, rqid
        if deliver > now:
            props[PROPERTY_TIMER_OUT_MS] = str(timer_out_ms(deliver, ctx.config.timer_precision_ms))
            props[PROPERTY_REAL_TOPIC] = topic
            props[PROPERTY_REAL_QUEUE_ID] = str(qid)
            topic, qid = TIMER_TOPIC, 0
        host, raw = self.svc.store_host or "127.0.0.1:10911", broker_properties(props, 16, not ctx.v4)  # a HashMap(16)
        m = SimMessage(topic, qid, props, body=body, born_ts=now, born_host=host, store_host=host, props_raw=raw)
        res = ctx.put(m, SERVICE)
        return res.message if res.ok else None


class PopRevive:
    """`PopReviveService` of a `ConsumerService`'s POP clients: one reviver per revive queue."""

    def __init__(self, svc: ConsumerService) -> None:
        self.svc = svc
        self.ctx = ctx = svc.ctx
        self.revivers: dict[int, Process] = {}
        if svc.pop_clients:
            for q in range(svc.config.revive_queue_num):
                ctx.model.on_append(svc.revive_topic, q, lambda q=q: _wake_idle(self.revivers.get(q)))

    def start(self) -> None:
        # BrokerController.start: shouldStartTime = now + disappearTimeAfterStart (-1 by default: no wait)
        self.should_start = self.ctx.clock() + self.svc.config.disappear_time_after_start
        for q in range(self.svc.config.revive_queue_num if self.svc.pop_clients else 0):
            self.revivers[q] = self.ctx.engine.process(self._loop(q), NORMAL, 0, f"pop-revive-{q}")

    def _loop(self, q: int):
        """`PopReviveService.run` for one revive queue: a round every reviveInterval (longer when idle)."""
        ctx, m = self.ctx, self.ctx.model
        topic, slow = self.svc.revive_topic, 1
        while True:
            if ctx.clock() < self.should_start:  # "PopReviveService Ready to run after shouldStartTime"
                yield 1000
                continue
            if m.cq_max(topic, q) <= self._offset(q) + 1:
                yield None  # nothing unread: the rounds would change nothing
                continue
            yield self.svc.config.revive_interval
            # consumeReviveMessage
            old = self._offset(q)
            start = ctx.clock()
            end_time = first_rt = no_msg = 0
            off = old + 1
            cks: dict[tuple, pop_format.PopCheckPoint] = {}  # with their revive offsets and the bits acked
            while True:
                hi = m.cq_max(topic, q)
                if off >= hi:
                    end_time = pop_rules.revive_scan_end_time(end_time, ctx.clock())
                    if pop_rules.may_revive(end_time, first_rt):  # the first checkpoint read is due: enough read
                        break
                    no_msg += 1
                    yield pop_rules.NO_MSG_SLEEP_MS
                    if pop_rules.revive_scan_gives_up(no_msg):
                        break
                    continue
                no_msg = 0
                if ctx.clock() - start > self.svc.config.revive_scan_time:
                    break
                for o, (phys, _size, _tags) in m.cq_units(topic, q, off, hi):
                    rec = m.message(phys)
                    off = o + 1
                    if rec is None:
                        continue
                    tag = rec.props.get(PROPERTY_TAGS)
                    if tag == CK_TAG:
                        ck = replace(pop_format.parse_checkpoint(rec.body), revive_offset=o)
                        cks[ck.merge_key()] = ck
                        first_rt = first_rt or ck.revive_time
                    elif tag == ACK_TAG:
                        ack = pop_format.parse_ack(rec.body)
                        ck = cks.get(ack.merge_key())
                        index = ck.index_of_ack(ack.ack_offsets[0]) if ck is not None else -1
                        if index > -1:  # the acked message's bit
                            cks[ack.merge_key()] = replace(ck, bit_map=ck.bit_map | 1 << index)
                    end_time = max(end_time, int(rec.props.get(PROPERTY_TIMER_DELIVER_MS, "0")))
            # mergeAndRevive
            new_offset = old
            for ck in sorted(cks.values(), key=attrgetter("revive_offset")):
                if not pop_rules.may_revive(end_time, ck.revive_time):
                    break
                for index in range(ck.num):  # reviveMsgFromCk: each message of the checkpoint not acked
                    if not ck.bit_map >> index & 1:
                        self._revive(ck, ck.ack_offset_by_index(index))
                new_offset = ck.revive_offset
            if new_offset > old:  # commitOffset(REVIVE_GROUP, reviveTopic, queueId, newOffset)
                self.svc.offsets[(REVIVE_GROUP, topic, q)] = new_offset
            if not cks:
                yield slow * self.svc.config.revive_interval
                slow = min(slow + 1, self.svc.config.revive_max_slow)
            else:
                slow = 1

    def _offset(self, q: int) -> int:
        """`consumeReviveMessage`'s old offset: max(reviveOffset, the revive group's committed offset), else -1.
        reviveOffset is the committed offset after every round; a new `PopReviveService` (a restart) reads it
        before `consumerOffsetManager.load()` (the `BrokerController` constructor), so it starts at -1 and the
        committed offset (after a crash: the last persisted one) alone decides."""
        return self.svc.offsets.get((REVIVE_GROUP, self.svc.revive_topic, q), -1)

    def _revive(self, ck: pop_format.PopCheckPoint, offset: int) -> None:
        """`reviveRetry`: the message again on the pop retry topic, queue 0, reconsumeTimes + 1; the topic is
        made first when absent (`addRetryTopicIfNotExist`, 1 queue, perm 6, the group's offset 0 committed)."""
        ctx, m = self.ctx, self.ctx.model
        msg = m.cq_message(ck.topic, ck.queue_id, offset)
        if msg is None:
            return
        group = ck.cid
        topic = pop_rules.revive_retry_topic(ck.topic, group, self.svc.config.enable_retry_topic_v2)
        props = pop_rules.revive_retry_properties(msg.props, msg.reconsume_times, ck.pop_time)
        new = msg.derive(topic, 0, props, broker_properties(props, 16, not ctx.v4))  # a new HashMap(16)
        new.reconsume_times = msg.reconsume_times + 1
        if not m.queue_ids(topic) and not any(t == topic for t, *_ in self.svc.topic_requests):
            self.svc.topic_requests.append((topic, pop_rules.RETRY_QUEUE_NUM, PERM_READ | PERM_WRITE, ctx.clock()))
            self.svc.offsets.setdefault((group, topic, 0), 0)  # initPopRetryOffset
        if self.svc.store_host and not msg.sys_flag & _HOSTS_V6:
            new.born_host = new.store_host = self.svc.store_host
        res = ctx.put(new, SERVICE)
        if res.ok:
            detail = {"reconsume_times": new.reconsume_times, "revive_time": ck.revive_time}
            self.svc._emit(
                "revive", group, msg, res.message, at=(topic, 0), **detail, queue_offset=res.message.queue_offset
            )
