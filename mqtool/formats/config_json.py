"""`config/topics.json` and `config/subscriptionGroup.json`: the broker's topic and group tables.

`TopicConfigManager.persist` writes a `TopicConfigSerializeWrapper` (dataVersion, topicConfigTable)
and `SubscriptionGroupManager.persist` its own fields (dataVersion, forbiddenTable,
subscriptionGroupTable), both with fastjson's pretty format; the reader and the writer pieces are
those of `offsets_json` (imported, not copied). `dump_topics` reproduces topics.json byte for byte
(checked against files RocketMQ 5.3.1 and 4.9.8 wrote). `dump_subscription_groups` follows the same
fastjson rules from the 5.3.1 / 4.9.8 sources (`SubscriptionGroupManager` serialises itself: dataVersion,
forbiddenTable (5.x only), subscriptionGroupTable; each `SubscriptionGroupConfig` by its getters in
alphabetical order); no real subscriptionGroup.json was available to check it against, so only the
member set and order follow the source, and a `subscriptionDataSet` (a HashSet) keeps the file's order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mqtool.formats.javahash import java_string_hash
from mqtool.formats.offsets_json import (
    INT_MAX,
    INT_MIN,
    ConfigFileError,
    DataVersion,
    _bean,
    _chm_order,
    _data_version,
    _dump_data_version,
    _fields,
    _hashmap_order,
    _integer,
    _Node,
    _present,
    _quote,
    _Reader,
    _str_key_map,
)

__all__ = ["GroupConfig", "GroupRetryPolicy", "SimpleSubscriptionData", "SubscriptionGroups", "TopicConfig", "Topics",
           "dump_subscription_groups", "dump_topics", "parse_subscription_groups", "parse_topics"]

TOPIC_TABLE_SIZE = 2048  # TopicConfigManager: new ConcurrentHashMap<>(1024) -> 2048 bins (5.3.1 and 4.9.8)
ATTRIBUTES_CAPACITY = 16  # TopicConfig.attributes: new HashMap<>()
GROUP_TABLE_SIZE = 2048  # SubscriptionGroupManager: new ConcurrentHashMap<>(1024) (5.3.1 and 4.9.8)
FORBIDDEN_TABLE_SIZE = 8  # SubscriptionGroupManager.forbiddenTable: new ConcurrentHashMap<>(4) -> 8 bins
PERM_PRIORITY, PERM_READ, PERM_WRITE, PERM_INHERIT = 8, 4, 2, 1  # PermName


@dataclass(frozen=True)
class TopicConfig:
    """`TopicConfig`; `attributes` is None for 4.x files (no such field), {} when empty."""

    topic_name: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = PERM_READ | PERM_WRITE
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] | None = field(default_factory=dict)

    @property
    def readable(self) -> bool:
        return bool(self.perm & PERM_READ)

    @property
    def writeable(self) -> bool:
        return bool(self.perm & PERM_WRITE)


@dataclass(frozen=True)
class Topics:
    """`TopicConfigSerializeWrapper`: table key -> TopicConfig, in the file's order."""

    topic_config_table: dict[str, TopicConfig]
    data_version: DataVersion | None = None


def _bool(node: _Node, what: str) -> bool:
    if node.kind == "bool":
        return node.value
    if node.kind == "string" and node.value in ("true", "false"):
        return node.value == "true"
    raise ConfigFileError(f"{what} must be true or false", node.line, node.col)


def _string(node: _Node, what: str) -> str:
    if node.kind in ("string", "int"):
        return str(node.value)
    raise ConfigFileError(f"{what} must be a string", node.line, node.col)


def _str_map(node: _Node | None, what: str) -> dict[str, str] | None:
    node = _present(node)
    if node is None:
        return None
    return {k: _string(v, f"{what}[{k!r}]") for k, v in _fields(node, what).items()}


def _topic(name: str, node: _Node) -> TopicConfig:
    f = _fields(node, f"topicConfigTable[{name!r}]")
    d = TopicConfig(name)

    def num(key: str, default: int) -> int:
        v = _present(f.get(key))
        return default if v is None else _integer(v, f"{name}.{key}", INT_MIN, INT_MAX)

    v = _present(f.get("topicName"))
    return TopicConfig(
        topic_name=name if v is None else _string(v, f"{name}.topicName"),
        read_queue_nums=num("readQueueNums", d.read_queue_nums),
        write_queue_nums=num("writeQueueNums", d.write_queue_nums),
        perm=num("perm", d.perm),
        topic_filter_type=_string(f["topicFilterType"], f"{name}.topicFilterType")
        if _present(f.get("topicFilterType")) else d.topic_filter_type,
        topic_sys_flag=num("topicSysFlag", d.topic_sys_flag),
        order=_bool(f["order"], f"{name}.order") if _present(f.get("order")) else False,
        attributes=_str_map(f.get("attributes"), f"{name}.attributes"),
    )


def parse_topics(text: str) -> Topics:
    """Read topics.json (5.x or 4.x); unknown members are ignored, as fastjson does."""
    top = _fields(_Reader(text).document(), "the document")
    table = _present(top.get("topicConfigTable"))
    topics = {} if table is None else {k: _topic(k, v) for k, v in _fields(table, "topicConfigTable").items()}
    return Topics(topics, _data_version(top.get("dataVersion")))


def _dump_topic(t: TopicConfig, indent: int) -> str:
    fields: list[tuple[str, str]] = []
    if t.attributes is not None:
        entries = [(k, _quote(t.attributes[k])) for k in _hashmap_order(t.attributes, ATTRIBUTES_CAPACITY)]
        fields.append(("attributes", _str_key_map(entries, indent + 1)))
    fields += [("order", "true" if t.order else "false"), ("perm", str(t.perm)),
               ("readQueueNums", str(t.read_queue_nums)), ("topicFilterType", _quote(t.topic_filter_type)),
               ("topicName", _quote(t.topic_name)), ("topicSysFlag", str(t.topic_sys_flag)),
               ("writeQueueNums", str(t.write_queue_nums))]
    return _bean(fields, indent)


def dump_topics(t: Topics, *, table_size: int = TOPIC_TABLE_SIZE) -> str:
    """topics.json exactly as `TopicConfigManager.persist()` writes it (no trailing newline).
    A TopicConfig with `attributes` None is written the 4.x way (no attributes member)."""
    fields: list[tuple[str, str]] = []
    if t.data_version is not None:
        fields.append(("dataVersion", _dump_data_version(t.data_version, 1)))
    order = _chm_order(t.topic_config_table, java_string_hash, table_size)
    entries = [(k, _dump_topic(t.topic_config_table[k], 2)) for k in order]
    fields.append(("topicConfigTable", _str_key_map(entries, 1)))
    return _bean(fields, 0)


# --------------------------------------------------------------------------- subscriptionGroup.json


@dataclass(frozen=True)
class GroupRetryPolicy:
    """`GroupRetryPolicy` (5.x): `type` EXPONENTIAL or CUSTOMIZED and the policy objects the file sets.
    `exponential` is (initial, max, multiplier) ms; `customized` is CustomizedRetryPolicy.next."""

    type: str = "CUSTOMIZED"
    exponential: tuple[int, int, int] | None = None
    customized: tuple[int, ...] | None = None


@dataclass(frozen=True)
class SimpleSubscriptionData:
    """One entry of `SubscriptionGroupConfig.subscriptionDataSet` (5.x, set by the proxy)."""

    topic: str | None = None
    expression_type: str | None = None
    expression: str | None = None
    version: int = 0


@dataclass(frozen=True)
class GroupConfig:
    """The `SubscriptionGroupConfig` settings an operator reads (5.3.1 defaults)."""

    group_name: str
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    attributes: dict[str, str] = field(default_factory=dict)
    group_retry_policy: GroupRetryPolicy | None = field(default_factory=GroupRetryPolicy)
    subscription_data_set: tuple[SimpleSubscriptionData, ...] | None = None


@dataclass(frozen=True)
class SubscriptionGroups:
    """`SubscriptionGroupManager`; `forbidden_table` None is a 4.x file (no such member, and the 4.x
    `SubscriptionGroupConfig` members only: no orderly flag, sys flag, timeout, retry policy, attributes)."""

    subscription_group_table: dict[str, GroupConfig]
    data_version: DataVersion | None = None
    forbidden_table: dict[str, dict[str, int]] | None = field(default_factory=dict)


_GROUP_FIELDS = {  # Java name -> (python name, kind)
    "consumeEnable": ("consume_enable", "bool"), "consumeFromMinEnable": ("consume_from_min_enable", "bool"),
    "consumeBroadcastEnable": ("consume_broadcast_enable", "bool"),
    "consumeMessageOrderly": ("consume_message_orderly", "bool"), "retryQueueNums": ("retry_queue_nums", "int"),
    "retryMaxTimes": ("retry_max_times", "int"), "brokerId": ("broker_id", "long"),
    "whichBrokerWhenConsumeSlowly": ("which_broker_when_consume_slowly", "long"),
    "notifyConsumerIdsChangedEnable": ("notify_consumer_ids_changed_enable", "bool"),
    "groupSysFlag": ("group_sys_flag", "int"), "consumeTimeoutMinute": ("consume_timeout_minute", "int"),
}


def _group(name: str, node: _Node) -> GroupConfig:
    f = _fields(node, f"subscriptionGroupTable[{name!r}]")
    values: dict = {}
    for java, (py, kind) in _GROUP_FIELDS.items():
        v = _present(f.get(java))
        if v is not None:
            values[py] = _bool(v, f"{name}.{java}") if kind == "bool" else _integer(
                v, f"{name}.{java}", *((INT_MIN, INT_MAX) if kind == "int" else ()))
    gn = _present(f.get("groupName"))
    grp = _present(f.get("groupRetryPolicy"))
    return GroupConfig(group_name=name if gn is None else _string(gn, f"{name}.groupName"),
                       attributes=_str_map(f.get("attributes"), f"{name}.attributes") or {},
                       group_retry_policy=GroupRetryPolicy() if grp is None else _retry_policy(name, grp),
                       subscription_data_set=_subscription_data_set(name, f.get("subscriptionDataSet")), **values)


def _retry_policy(name: str, node: _Node) -> GroupRetryPolicy:
    f = _fields(node, f"{name}.groupRetryPolicy")
    what = f"{name}.groupRetryPolicy"
    exp, cus = _present(f.get("exponentialRetryPolicy")), _present(f.get("customizedRetryPolicy"))
    exponential = None
    if exp is not None:
        e = _fields(exp, f"{what}.exponentialRetryPolicy")
        d = (5000, 7200000, 2)  # ExponentialRetryPolicy defaults: 5 s, 2 h, x2
        exponential = tuple(d[i] if _present(e.get(k)) is None else _integer(e[k], f"{what}.{k}")
                            for i, k in enumerate(("initial", "max", "multiplier")))
    customized = None
    if cus is not None:
        nxt = _present(_fields(cus, f"{what}.customizedRetryPolicy").get("next"))
        if nxt is not None and nxt.kind != "array":
            raise ConfigFileError(f"{what}.customizedRetryPolicy.next must be a list", nxt.line, nxt.col)
        customized = () if nxt is None else tuple(_integer(v, f"{what}.next") for v in nxt.value)
    t = _present(f.get("type"))
    return GroupRetryPolicy("CUSTOMIZED" if t is None else _string(t, f"{what}.type"), exponential, customized)


def _subscription_data_set(name: str, node: _Node | None) -> tuple[SimpleSubscriptionData, ...] | None:
    node = _present(node)
    if node is None:
        return None
    if node.kind != "array":
        raise ConfigFileError(f"{name}.subscriptionDataSet must be a list", node.line, node.col)
    out = []
    for item in node.value:
        f = {k: _present(v) for k, v in _fields(item, f"{name}.subscriptionDataSet[]").items()}
        s = {k: None if f.get(k) is None else _string(f[k], f"{name}.{k}")
             for k in ("topic", "expressionType", "expression")}
        ver = 0 if f.get("version") is None else _integer(f["version"], f"{name}.version")
        out.append(SimpleSubscriptionData(s["topic"], s["expressionType"], s["expression"], ver))
    return tuple(out)


def parse_subscription_groups(text: str) -> SubscriptionGroups:
    """Read subscriptionGroup.json leniently (groupRetryPolicy and subscriptionDataSet are skipped)."""
    top = _fields(_Reader(text).document(), "the document")
    table = _present(top.get("subscriptionGroupTable"))
    groups = {} if table is None else {k: _group(k, v) for k, v in _fields(table, "subscriptionGroupTable").items()}
    forbidden: dict[str, dict[str, int]] | None = {} if "forbiddenTable" in top else None
    fb = _present(top.get("forbiddenTable"))
    if fb is not None:
        forbidden = {}
        for group, topics in _fields(fb, "forbiddenTable").items():
            forbidden[group] = {t: _integer(v, f"forbiddenTable[{group!r}][{t!r}]", INT_MIN, INT_MAX)
                                for t, v in _fields(topics, f"forbiddenTable[{group!r}]").items()}
    return SubscriptionGroups(groups, _data_version(top.get("dataVersion")), forbidden)


def _dump_retry_policy(p: GroupRetryPolicy, indent: int) -> str:
    fields: list[tuple[str, str]] = []
    if p.customized is not None:
        fields.append(("customizedRetryPolicy", _bean([("next", "[" + ",".join(map(str, p.customized)) + "]")],
                                                      indent + 1)))
    if p.exponential is not None:
        initial, max_, multiplier = p.exponential
        fields.append(("exponentialRetryPolicy", _bean([("initial", str(initial)), ("max", str(max_)),
                                                        ("multiplier", str(multiplier))], indent + 1)))
    fields.append(("type", _quote(p.type)))
    return _bean(fields, indent)


def _dump_subscription(d: SimpleSubscriptionData, indent: int) -> str:
    fields = [(k, _quote(v)) for k, v in (("expression", d.expression), ("expressionType", d.expression_type),
                                          ("topic", d.topic)) if v is not None]
    return _bean([*fields, ("version", str(d.version))], indent)


def _dump_group(g: GroupConfig, indent: int, v4: bool) -> str:
    """One `SubscriptionGroupConfig` by its getters, alphabetically; null members are left out."""
    b = {True: "true", False: "false"}
    fields: dict[str, str] = {
        "brokerId": str(g.broker_id), "consumeBroadcastEnable": b[g.consume_broadcast_enable],
        "consumeEnable": b[g.consume_enable], "consumeFromMinEnable": b[g.consume_from_min_enable],
        "groupName": _quote(g.group_name), "notifyConsumerIdsChangedEnable": b[g.notify_consumer_ids_changed_enable],
        "retryMaxTimes": str(g.retry_max_times), "retryQueueNums": str(g.retry_queue_nums),
        "whichBrokerWhenConsumeSlowly": str(g.which_broker_when_consume_slowly),
    }
    if not v4:
        entries = [(k, _quote(g.attributes[k])) for k in _hashmap_order(g.attributes, ATTRIBUTES_CAPACITY)]
        fields |= {"attributes": _str_key_map(entries, indent + 1),
                   "consumeMessageOrderly": b[g.consume_message_orderly],
                   "consumeTimeoutMinute": str(g.consume_timeout_minute), "groupSysFlag": str(g.group_sys_flag)}
        if g.group_retry_policy is not None:
            fields["groupRetryPolicy"] = _dump_retry_policy(g.group_retry_policy, indent + 1)
        if g.subscription_data_set is not None:
            fields["subscriptionDataSet"] = "[" + ",".join(_dump_subscription(d, indent + 1)
                                                           for d in g.subscription_data_set) + "]"
    return _bean(sorted(fields.items()), indent)


def dump_subscription_groups(g: SubscriptionGroups, *, table_size: int = GROUP_TABLE_SIZE) -> str:
    """subscriptionGroup.json as `SubscriptionGroupManager.persist()` writes it (no trailing newline);
    `forbidden_table` None writes the 4.x member set. Inner forbidden maps are fastjson's (16 bins)."""
    v4 = g.forbidden_table is None
    fields: list[tuple[str, str]] = []
    if g.data_version is not None:
        fields.append(("dataVersion", _dump_data_version(g.data_version, 1)))
    if not v4:
        fb = g.forbidden_table or {}
        entries = [(group, _str_key_map([(t, str(fb[group][t])) for t in _chm_order(fb[group], java_string_hash, 16)],
                                        2)) for group in _chm_order(fb, java_string_hash, FORBIDDEN_TABLE_SIZE)]
        fields.append(("forbiddenTable", _str_key_map(entries, 1)))
    order = _chm_order(g.subscription_group_table, java_string_hash, table_size)
    entries = [(k, _dump_group(g.subscription_group_table[k], 2, v4)) for k in order]
    fields.append(("subscriptionGroupTable", _str_key_map(entries, 1)))
    return _bean(fields, 0)
