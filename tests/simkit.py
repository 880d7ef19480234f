"""Builders of small in-memory stores for hand-computed simulator cases (tests/simulate)."""

from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.names import RMQ_SYS_SCHEDULE_TOPIC, RMQ_SYS_TRANS_HALF_TOPIC, TIMER_TOPIC
from mqtool.simulate.model import MemoryBase, SimMessage
from mqtool.simulate.runner import simulate
from mqtool.simulate.scenario import parse_scenario

S = 1_800_000_000_000  # a store time, a whole second


class Built:
    """A MemoryBase plus the timer state `simulate(..., base=, timer_state=)` needs."""

    def __init__(self):
        self.base = MemoryBase()
        self.timer_state = {"timercheck": None, "units": [], "end": 0}
        self.n = 0

    def uid(self):
        self.n += 1
        return f"UK{self.n:04d}"

    def delay(self, level, store_ts, delay_ms, topic="T", qid=0):
        props = {"UNIQ_KEY": self.uid(), "DELAY": str(level), "REAL_TOPIC": topic, "REAL_QID": str(qid)}
        m = SimMessage(RMQ_SYS_SCHEDULE_TOPIC, level - 1, props, body=b"d", born_ts=store_ts, store_ts=store_ts)
        return self.base.add(m, tags=store_ts + delay_ms)

    def timer(self, out_ms, store_ts, uniq=None, cancel=None, topic="T"):
        props = {"UNIQ_KEY": uniq or self.uid(), "TIMER_OUT_MS": str(out_ms), "REAL_TOPIC": topic, "REAL_QID": "0"}
        if cancel:
            props["TIMER_DEL_UNIQKEY"] = cancel
        m = SimMessage(TIMER_TOPIC, 0, props, body=b"t", born_ts=store_ts, store_ts=store_ts)
        return self.base.add(m)

    def half(self, born_ts, group="PG", keys="k", **extra):
        props = {"UNIQ_KEY": self.uid(), "TRAN_MSG": "true", "PGROUP": group, "KEYS": keys, "REAL_TOPIC": "TX",
                 "REAL_QID": "0", **extra}
        m = SimMessage(RMQ_SYS_TRANS_HALF_TOPIC, 0, props, body=b"h", born_ts=born_ts, store_ts=born_ts)
        return self.base.add(m)


def config(**java):
    return BrokerConfig().with_overrides(java) if java else BrokerConfig()


def run(built: Built, start: int, until: int, scenario=None, seed=0, version="5.3", cfg=None):
    """`simulate` over the built store from `start` to `until` (a scenario document, broker defaults)."""
    sc = parse_scenario(scenario or {}, start)
    return simulate(None, cfg or config(), start, until, sc, seed, version, base=built.base,
                    timer_state=built.timer_state)


def events(result, kind: str) -> list:
    """The events of one kind a run recorded, in order."""
    return [e for e in result.events if e.event == kind]


def spy_read_plain(monkeypatch, module) -> list:
    """Every answer `batchread.read_plain` gives when `module` (a service's module) calls it, in order:
    the list returned, filled as the run goes."""
    from mqtool.simulate import batchread

    answers: list = []
    real = batchread.read_plain

    def spy(*a):
        out = real(*a)
        answers.extend(out)
        return out

    monkeypatch.setattr(module, "read_plain", spy)
    return answers
