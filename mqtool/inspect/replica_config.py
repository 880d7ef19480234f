"""The config files a slave copies from its master (RocketMQ 5.3.1 `SlaveSynchronize#syncAll`, every 10 s):
topics.json, consumerOffset.json, delayOffset.json and subscriptionGroup.json, compared master against slave.

After a promotion the slave serves with its own copies: a topic it lacks is unknown to it, a consumer offset
behind the master's makes the group consume those messages again, a delay level's offset behind the master's
delivers those delayed messages again. `dataVersion` equal on both sides means the last sync copied the file.
"""

from __future__ import annotations

from mqtool.rules.consumer import split_topic_at_group
from mqtool.store.store import Store

EXAMPLES = 20  # offsets behind listed per pair


def _version(dv) -> dict | None:
    return None if dv is None else {"counter": dv.counter, "timestamp": dv.timestamp}


def _tables(m_file, s_file, m_table: dict | None, s_table: dict | None) -> dict:
    """One ConfigManager file on both sides: present or not, how many entries, the names only one side has."""
    m, s = set(m_table or ()), set(s_table or ())
    return {
        "master_file": m_file is not None,
        "slave_file": s_file is not None,
        "master": len(m),
        "slave": len(s),
        "only_on_master": sorted(m - s),
        "only_on_slave": sorted(s - m),
    }


def _topics(master: Store, slave: Store) -> dict:
    mt, st = master.config_files.topics, slave.config_files.topics
    return {
        **_tables(mt, st, mt and mt.topic_config_table, st and st.topic_config_table),
        "master_version": _version(mt.data_version if mt else None),
        "slave_version": _version(st.data_version if st else None),
    }


def _groups(master: Store, slave: Store) -> dict:
    mg, sg = master.config_files.subscription_groups, slave.config_files.subscription_groups
    return _tables(mg, sg, mg and mg.subscription_group_table, sg and sg.subscription_group_table)


def _consumer_offsets(master: Store, slave: Store) -> dict:
    mo, so = master.config_files.consumer_offsets, slave.config_files.consumer_offsets
    m = mo.offset_table if mo else {}
    s = so.offset_table if so else {}
    missing, behind, ahead = 0, [], 0
    for key, queues in sorted(m.items()):
        for qid, off in sorted(queues.items()):
            got = s.get(key, {}).get(qid)
            if got is None:
                missing += 1
            elif got < off:
                topic, group = split_topic_at_group(key) or (key, "")  # a key the broker skips: shown whole
                behind.append(
                    {"topic": topic, "group": group, "queue_id": qid, "master": off, "slave": got, "again": off - got}
                )
            elif got > off:
                ahead += 1
    behind.sort(key=lambda r: -r["again"])
    return {
        "master_file": mo is not None,
        "slave_file": so is not None,
        "entries": sum(len(q) for q in m.values()),
        "missing_on_slave": missing,
        "behind": len(behind),
        "consumed_again": sum(r["again"] for r in behind),
        "ahead": ahead,
        "examples": behind[:EXAMPLES],
    }


def _delay_offsets(master: Store, slave: Store) -> dict:
    md, sd = master.config_files.delay_offsets, slave.config_files.delay_offsets
    m = md.offset_table if md else {}
    s = sd.offset_table if sd else {}
    behind = [
        {"level": lv, "master": off, "slave": s.get(lv, 0), "again": off - s.get(lv, 0)}
        for lv, off in sorted(m.items())
        if s.get(lv, 0) < off
    ]
    return {
        "master_file": md is not None,
        "slave_file": sd is not None,
        "levels_behind": behind,
        "delivered_again": sum(r["again"] for r in behind),
    }


def config_sync(master: Store, slave: Store) -> dict:
    """What `SlaveSynchronize` would have made equal, as the files are now."""
    return {
        "topics": _topics(master, slave),
        "subscription_groups": _groups(master, slave),
        "consumer_offsets": _consumer_offsets(master, slave),
        "delay_offsets": _delay_offsets(master, slave),
    }


def config_findings(where: str, cfg: dict) -> list[tuple[str, str]]:
    """(severity, message) for what a promotion would serve differently."""
    out = []
    t = cfg["topics"]
    if t["only_on_master"]:
        out.append(
            (
                "warning",
                f"{where}: the slave's topics.json lacks {len(t['only_on_master'])} topic(s) of the "
                f"master ({', '.join(t['only_on_master'][:5])}{', ...' if len(t['only_on_master']) > 5 else ''})"
                ": SlaveSynchronize has not copied them",
            )
        )
    c = cfg["consumer_offsets"]
    if c["behind"] or c["missing_on_slave"]:
        out.append(
            (
                "warning",
                f"{where}: {c['behind']} consumer offset(s) behind the master's ({c['consumed_again']} "
                f"message(s) consumed again after a promotion), {c['missing_on_slave']} missing on the slave",
            )
        )
    d = cfg["delay_offsets"]
    if d["levels_behind"]:
        out.append(
            (
                "warning",
                f"{where}: delayOffset.json behind the master's on {len(d['levels_behind'])} level(s)"
                f" ({d['delivered_again']} delayed message(s) delivered again after a promotion)",
            )
        )
    elif d["master_file"] and not d["slave_file"]:
        out.append(("info", f"{where}: no delayOffset.json on the slave (the master has one)"))
    return out
