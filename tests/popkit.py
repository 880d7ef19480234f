"""The POP scenario shared by tests/store/test_pop.py and tests/inspect/test_overview_pop.py (spec §15).

On the demo store, from S: GID_ok pops and acks, GID_bad pops and fails, invisibleTime 60 s, long polling,
32 messages a request, the broker's draw fixed at 50 (pop_random: the topic before the retry topic, queues
2, 3, 0, 1). Each group pops the 12 messages of DemoTopicA: the 11 backlog units (queues 0-3 hold 3, 2, 4, 2)
in one request at S, one checkpoint per queue, and at S + 1 s the one the schedule service delivers (queue 3,
offset 2). Every request advances the revive queue counter, the empty one that follows a full one too:
GID_ok's request at S takes revive queue 0, its waiting request (answered at S + 1 s) 1; GID_bad's 2 and 3.

Times by rocketmq-all-5.3.1's rules (`PopMessageProcessor.buildCkMsg`, `AckMessageProcessor.appendAck`,
`PopReviveService.consumeReviveMessage` / `mergeAndRevive`, timer precision 1 s, 100 ms polls):
- reviveTime = popTime + invisibleTime: S + 60 s (backlog), S + 61 s (the message popped at S + 1 s);
- a checkpoint reaches its revive queue at reviveTime - ackTimeInterval (S + 59 s / S + 60 s), an ack at
  popTime + invisibleTime (S + 60 s / S + 61 s); the revive round starts reviveInterval (1 s) after the
  first delivery, endTime is the newest TIMER_DELIVER_MS read, and moves to now once now - endTime > 3 s;
  a checkpoint is revived when endTime - reviveTime > ackTimeInterval + 1 s;
- GID_bad's queue 2 (four checkpoints delivered at S + 59 s) reaches endTime S + 62.1 s: 11 revives then;
  queue 3 (delivered at S + 60 s) S + 63.1 s: the last one;
- the revived messages are popped again from %RETRY%GID_bad_DemoTopicA at once: 11 at S + 62.1 s
  (reviveTime S + 122.1 s), one at S + 63.1 s (S + 123.1 s).
"""

from mqtool.formats.broker_conf import load_broker_conf
from mqtool.simulate.output import write_store
from mqtool.simulate.runner import simulate
from mqtool.simulate.scenario import parse_scenario
from mqtool.store.store import Store

S = 1_790_000_100_000
CONF = "fixtures/demo.broker.conf"
REVIVE = "rmq_sys_REVIVE_LOG_DemoCluster"
RETRY = "%RETRY%GID_bad_DemoTopicA"
GROUPS = [{"group": "GID_ok", "topic": "DemoTopicA", "mode": "pop", "invisible_time": "60s", "pop_random": 50},
          {"group": "GID_bad", "topic": "DemoTopicA", "mode": "pop", "outcome": "fail", "invisible_time": "60s",
           "pop_random": 50}]

SECOND_POP = S + 62_100  # the first pops of the revived messages (docstring)

# read at S + 70 s: GID_bad's 12 messages (5 checkpoints) revived, popped again on the retry topic (2 requests)
BY_GROUP_AT_70S = [
    {"group": "GID_bad", "topic": RETRY, "checkpoints": 2, "popped": 12, "acked": 0,
     "invisible": 12, "due": 0, "revived": 0, "next_revive_time": SECOND_POP + 60_000},
    {"group": "GID_bad", "topic": "DemoTopicA", "checkpoints": 5, "popped": 12, "acked": 0, "invisible": 0,
     "due": 0, "revived": 12, "next_revive_time": None},
    {"group": "GID_ok", "topic": "DemoTopicA", "checkpoints": 5, "popped": 12, "acked": 12, "invisible": 0,
     "due": 0, "revived": 0, "next_revive_time": None}]

_RUNS: dict[int, tuple] = {}


def pop_store(tmp_path_factory, until: int) -> tuple[Store, object]:
    """The demo store plus what the scenario's run up to `until` appended (written once per session;
    read-only afterwards), and the run's result."""
    if until not in _RUNS:
        cfg = load_broker_conf(CONF)
        st = Store.open("fixtures/demo", cfg)
        r = simulate(st, cfg, S, until, parse_scenario({"consumers": GROUPS}, S), broker_version="5.3")
        out = tmp_path_factory.mktemp("pop") / "out"
        write_store(st, r, out)
        _RUNS[until] = Store.open(out, cfg), r
    return _RUNS[until]
