"""Broker rules: each rule RocketMQ implements once, implemented once here, as a pure function.

A rule is named after the Java method it mirrors (snake_case; the Java name, its class and the
spec section are in its docstring) and works on plain values: no file I/O, no `Store`, no wall
clock. `inspect`, `simulate`, `audit` and `trace` call these functions instead of restating them,
so a behaviour read from RocketMQ's source has one place to be right (or wrong) in.

| module | service (spec) | rules |
|---|---|---|
| `schedule` | `ScheduleMessageService` (§4) | `correctDelayOffset`, `compute`/`correctDeliverTimestamp`, `start` |
| `timer` | `TimerMessageStore` (§6) | `needRoll`, `needDelete`, the roll of `doEnqueue`, the chain walk of `dequeue` |
| `transaction` | `TransactionalMessageServiceImpl` (§7) | `needDiscard`, `needSkip`, immunity, `isNeedCheck` |
| `index` | `IndexService` (§11) | `buildIndex` keys, `putKey`, `queryOffset` |
| `recovery` | recovery (§2.7, §3, §6.10, §8) | `recoverNormally`, `recoverAbnormally` |
| `retry` | `consumerSendMsgBack` (§17) | next level, `%RETRY%` / `%DLQ%` topics, drop |
| `consumer` | `getConsumeStats` (§5) | `whichTopicByConsumer`, `queryOffset`, `computeTotalDiff`, sys groups |
| `pop` | `PopReviveService` (§15) | checkpoint / ack bodies, when a pop is revived |
| `rocksdb` | `RocksDBConsumeQueueStore` (§14) | `isSystemTopic`, `iterateOffsetTable2FindDirty` (`cleanDirty`) |
| `java` | - | `Integer.parseInt` / `Long.parseLong`, which the rules above depend on |

Where RocketMQ 4.9.8 and 5.3.1 differ, the difference is a parameter, never a second copy.
"""
