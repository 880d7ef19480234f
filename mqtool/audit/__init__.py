"""Store audits (issue #5): pure checks over per-file / per-queue partitions, run locally or on Spark.

Each check has one definition and one name, used in every finding it produces:

| check | module | runs in a task (per partition) | runs on the driver (compact inputs) |
|---|---|---|---|
| `commitlog.integrity` | `commitlog.py` | walk of one CommitLog file or byte range | torn tails, missing files, gaps |
| `consumequeue.consistency` | `consumequeue.py` | units of one ConsumeQueue file | dispatch lag, ranges |
| `schedule` | `schedule.py` | tagsCode of SCHEDULE_TOPIC_XXXX units | delayOffset.json, overdue messages |
| `timer` | `timer.py` | TimerLog units; wheel slots vs chain walks | timercheck cursors |
| `transactions` | `transactions.py` | (kept records, COMMIT records) | stuck, dangling ops, discards, bad COMMITs |
| `stats` | `stats.py` | per topic/queue counters in the walk | merged counts, duplicate UNIQ_KEYs |
| `index` | `index.py` | one IndexFile: structure, loops, entries vs records | records not indexed (sampled) |
| `rocksdb.integrity` | `rocksdb.py` | (none: entries are `consumequeue.consistency` tasks) | offset table, CHECKPOINT |

`plan.py` cuts a store (`mqtool.store.store.Store`, with its `BrokerConfig`) into tasks (plain
dataclasses of paths and ints), `tasks.run_task` runs one task anywhere (this process or a Spark
Python worker) and returns a typed result (`results.py`, one picklable dataclass per task kind),
and `report.finish` runs one driver function per check over those results, each adding to one
`Findings` accumulator, and builds the summary.
`runner.py` is the local engine; `mqtool.spark.runner` the Spark one. Every task reads the store
through `mqtool.store.fastscan` (`records.py` looks records up by offset with the same kernel):
there is no decoder in this package.
"""

CHECKS = ("commitlog.integrity", "consumequeue.consistency", "schedule", "timer", "transactions", "stats", "index")
