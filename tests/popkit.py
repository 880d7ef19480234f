"""The POP scenario shared by tests/store/test_pop.py and tests/inspect/test_overview_pop.py (spec §15).

On the demo store, from S: GID_ok pops and acks, GID_bad pops and fails, invisibleTime 60 s. Each group
pops the 12 messages of DemoTopicA: the 11 backlog units at S, and at S + 1 s the one the schedule
service delivers. Checkpoints go round-robin over the 8 revive queues (GID_ok's 11 take queues 0..7,
0, 1, 2; GID_bad's 11 take 3..7, 0..5; at S + 1 s GID_ok takes 6, GID_bad 7).

Times by rocketmq-all-5.3.1's rules (`PopMessageProcessor.buildCkMsg`, `AckMessageProcessor.appendAck`,
`PopReviveService.consumeReviveMessage` / `mergeAndRevive`, timer precision 1 s, 100 ms polls):
- reviveTime = popTime + invisibleTime: S + 60 s (backlog), S + 61 s (the message popped at S + 1 s);
- a checkpoint reaches its revive queue at reviveTime - ackTimeInterval (S + 59 s / S + 60 s), an ack at
  popTime + invisibleTime (S + 60 s / S + 61 s); the revive round starts reviveInterval (1 s) after the
  first delivery, endTime is the newest TIMER_DELIVER_MS read, and moves to now once now - endTime > 3 s;
  a checkpoint is revived when endTime - reviveTime > ackTimeInterval + 1 s;
- a queue whose newest record was delivered at S + 60 s reaches endTime S + 63.1 s: every GID_bad
  checkpoint there is revived at S + 63.1 s (2.1 s past S + 61 s is enough); queue 6 reads GID_ok's
  ack delivered at S + 61 s, so its GID_bad checkpoint is revived at S + 64.1 s;
- the revived message is popped again from %RETRY%GID_bad_DemoTopicA at once: 11 at S + 63.1 s
  (reviveTime S + 123.1 s), one at S + 64.1 s (S + 124.1 s).
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
GROUPS = [{"group": "GID_ok", "topic": "DemoTopicA", "mode": "pop", "invisible_time": "60s"},
          {"group": "GID_bad", "topic": "DemoTopicA", "mode": "pop", "outcome": "fail", "invisible_time": "60s"}]

SECOND_POP = S + 63_100  # the first pops of the revived messages (docstring)

# read at S + 70 s: GID_bad's 12 checkpoints revived, popped again on the retry topic
BY_GROUP_AT_70S = [
    {"group": "GID_bad", "topic": RETRY, "checkpoints": 12, "popped": 12, "acked": 0,
     "invisible": 12, "due": 0, "revived": 0, "next_revive_time": SECOND_POP + 60_000},
    {"group": "GID_bad", "topic": "DemoTopicA", "checkpoints": 12, "popped": 12, "acked": 0, "invisible": 0,
     "due": 0, "revived": 12, "next_revive_time": None},
    {"group": "GID_ok", "topic": "DemoTopicA", "checkpoints": 12, "popped": 12, "acked": 12, "invisible": 0,
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
