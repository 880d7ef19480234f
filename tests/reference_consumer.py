"""The reference model of push consumption: each message of a queue delivered by its own event
(`ConsumeMessageConcurrentlyService` consuming one message per request). The library's `_walk` delivers
runs (`ConsumerService._deliver`) and must write the same event log, byte for byte
(`test_consumer_reference.py`)."""

from mqtool.simulate.consumer import ConsumerService, Delivery
from mqtool.simulate.engine import NORMAL


class ReferenceConsumer(ConsumerService):
    """`ConsumerService` with each message walked and delivered alone."""

    def _walk(self, key):
        m = self.ctx.model
        group, topic, qid = key
        while True:
            for o, (phys, _size, _tags) in m.cq_units(topic, qid, self.next_unit[key], m.cq_max(topic, qid)):
                self.next_unit[key] = o + 1
                msg = m.message(phys)
                if msg is None:
                    continue
                spec = self._spec(group, msg)
                if spec is None:
                    self._commit(key, o)
                    continue
                run, gen = [Delivery(spec, msg, o)], self.gen
                self.ctx.engine.schedule(lambda r=run, g=gen: self._deliver(g, key, r), NORMAL, spec.consume_delay_ms)
            yield None
