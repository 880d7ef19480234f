"""`--out DIR`: a new store = the input plus everything the simulated services appended.

Uses `mqtool.builder.writer.StoreWriter.extend` (the input is copied, never modified; a DLedger-mode
store through `mqtool.builder.dledger.DLedgerStoreWriter.extend`: entries after its last one), then appends
every re-put record in the order the simulation put it (same bytes: the properties string the
broker would have built), the new TimerLog units and wheel slots, and writes config/timercheck,
config/delayOffset.json and config/consumerOffset.json as a clean shutdown at `--until` would.
"""

from __future__ import annotations

from pathlib import Path

from mqtool.formats.names import CID_SYS_RMQ_TRANS
from mqtool.simulate.runner import SimulationResult


def write_store(store, result: SimulationResult, out: Path) -> list[str]:
    """Write the new store; returns warnings (e.g. offsets the writer placed differently)."""
    from mqtool.builder.config import create_topics, with_group_topic_map
    from mqtool.builder.writer import StoreWriter
    from mqtool.formats.offsets_json import ConsumerOffsets, DataVersion, DelayOffsets

    state = result.state
    model, timer, config = state["model"], state["timer"], state["config"]
    warnings: list[str] = []
    dl = None
    if store.dledger is not None:  # re-puts become DLedger entries (body at pos + 48), as appendAsLeader
        from mqtool.builder.dledger import DLedgerStoreWriter

        self_id = store.dledger.home.name.removeprefix("dledger-")
        dl = DLedgerStoreWriter.extend(store.root, out, self_id, config, result.broker_version)
        w = dl.store
    else:
        w = StoreWriter.extend(store.root, out, config, result.broker_version)
    try:
        for m in model.appended:
            rec = w.make_record(
                m.topic,
                m.queue_id,
                m.body or b"",
                model.raw(m),
                flag=m.flag,
                sys_flag=m.sys_flag,
                born_timestamp=m.born_ts,
                born_host=m.born_host,
                store_timestamp=m.store_ts,
                store_host=m.store_host,
                reconsume_times=m.reconsume_times,
                prepared_transaction_offset=m.prepared_tx_offset,
            )
            placed = dl.put(rec) if dl is not None else w.append_records([rec], [None])[0]
            if placed.physical_offset != m.phys:
                warnings.append(f"{m.topic} record predicted at {m.phys} written at {placed.physical_offset}")
        if timer is not None:
            for pos in timer.st.new_units:
                prev, magic, write, delayed, offset_py, size_py, topic_hash = timer.st.units.get(pos)
                at = w.append_timerlog_unit(prev, magic, write, delayed - write, offset_py, size_py, topic_hash)
                if at != pos:
                    warnings.append(f"TimerLog unit predicted at {pos} written at {at}")
                slot = w.wheel.get_slot(delayed)
                num = (slot.num if slot.first_pos != -1 else 0) + (-1 if magic & 4 else 1)  # 4: a delete unit
                w.wheel.put_slot(delayed, slot.first_pos if slot.first_pos != -1 else at, at, num, slot.magic)
            queue = timer.st.curr_queue_offset
            w.write_timercheck(timer.read_time(), w.timerlog_end, queue, queue, timestamp=result.until_ms, counter=1)
        old, co = store.config_files.delay_offsets, store.config_files.consumer_offsets or ConsumerOffsets({})
        dv = None if result.broker_version.startswith("4") else (old and old.data_version) or DataVersion(0, 0, 0)
        w.write_delay_offsets(DelayOffsets(dict(sorted(state["schedule_offsets"].items())), dv))
        table = {k: dict(v) for k, v in co.offset_table.items()}
        for (topic, qid), off in sorted(state["consumer_offsets"].items()):
            table.setdefault(f"{topic}@{CID_SYS_RMQ_TRANS}", {})[qid] = off
        consumers = state.get("consumers")
        if consumers is not None:  # a clean shutdown at --until persists the groups' offsets
            for (group, topic, qid), off in sorted(consumers.offsets.items()):
                table.setdefault(f"{topic}@{group}", {})[qid] = off
        w.write_consumer_offsets(with_group_topic_map(ConsumerOffsets(table, co.data_version, co.group_topic_map)))
        cf = store.config_files
        json_topics = (cf.topics_file or "").startswith("config/topics.json")  # not RocksDB's config/topics
        if consumers is not None and cf.topics is not None and json_topics:
            topics = create_topics(cf.topics, consumers.topic_requests, result.broker_version.startswith("4"))
            if topics != cf.topics:  # a send-back created a retry or DLQ topic (TopicConfigManager persists)
                w.write_config("topics.json", topics)
        w.write_checkpoint()
        if dl is not None:
            dl.persist()
    finally:
        (dl or w).close()
    return warnings
