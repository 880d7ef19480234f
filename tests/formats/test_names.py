"""`mqtool.formats.names` is the one module that spells RocketMQ's system names and property keys.

The values below were read from rocketmq-all-5.3.1: `common/.../message/MessageConst.java`,
`common/.../topic/TopicValidator.java`, `common/.../MixAll.java`, `common/.../PopAckConstants.java`,
`store/.../timer/TimerMessageStore.java` and `broker/.../transaction/queue/TransactionalMessageUtil.java`.
"""

import ast
from pathlib import Path

import mqtool
from mqtool.formats import names

PACKAGE = Path(mqtool.__file__).parent
NAMES_PY = PACKAGE / "formats" / "names.py"

ROCKETMQ = {
    # TopicValidator
    "SYSTEM_TOPIC_PREFIX": "rmq_sys_",
    "RMQ_SYS_SCHEDULE_TOPIC": "SCHEDULE_TOPIC_XXXX",
    "RMQ_SYS_TRANS_HALF_TOPIC": "RMQ_SYS_TRANS_HALF_TOPIC",
    "RMQ_SYS_TRANS_OP_HALF_TOPIC": "RMQ_SYS_TRANS_OP_HALF_TOPIC",
    "RMQ_SYS_TRANS_CHECK_MAX_TIME_TOPIC": "TRANS_CHECK_MAX_TIME_TOPIC",
    "RMQ_SYS_ROCKSDB_OFFSET_TOPIC": "CHECKPOINT_TOPIC",
    # TimerMessageStore, PopAckConstants (SYSTEM_TOPIC_PREFIX + "wheel_timer" / + "REVIVE_LOG_")
    "TIMER_TOPIC": "rmq_sys_wheel_timer",
    "REVIVE_TOPIC": "rmq_sys_REVIVE_LOG_",
    # PopAckConstants
    "REVIVE_GROUP": "CID_RMQ_SYS_REVIVE_GROUP",
    "CK_TAG": "ck",
    "ACK_TAG": "ack",
    "BATCH_ACK_TAG": "bAck",
    # MixAll
    "RETRY_GROUP_TOPIC_PREFIX": "%RETRY%",
    "DLQ_GROUP_TOPIC_PREFIX": "%DLQ%",
    "CID_SYS_RMQ_TRANS": "CID_RMQ_SYS_TRANS",
    "CID_RMQ_SYS_PREFIX": "CID_RMQ_SYS_",
    # TransactionalMessageUtil
    "REMOVE_TAG": "d",
    # MessageConst
    "PROPERTY_KEYS": "KEYS",
    "PROPERTY_TAGS": "TAGS",
    "PROPERTY_WAIT_STORE_MSG_OK": "WAIT",
    "PROPERTY_DELAY_TIME_LEVEL": "DELAY",
    "PROPERTY_RETRY_TOPIC": "RETRY_TOPIC",
    "PROPERTY_REAL_TOPIC": "REAL_TOPIC",
    "PROPERTY_REAL_QUEUE_ID": "REAL_QID",
    "PROPERTY_TRANSACTION_PREPARED": "TRAN_MSG",
    "PROPERTY_PRODUCER_GROUP": "PGROUP",
    "PROPERTY_MIN_OFFSET": "MIN_OFFSET",
    "PROPERTY_MAX_OFFSET": "MAX_OFFSET",
    "PROPERTY_ORIGIN_MESSAGE_ID": "ORIGIN_MESSAGE_ID",
    "PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX": "UNIQ_KEY",
    "PROPERTY_INNER_NUM": "INNER_NUM",
    "PROPERTY_INNER_BASE": "INNER_BASE",
    "PROPERTY_CHECK_IMMUNITY_TIME_IN_SECONDS": "CHECK_IMMUNITY_TIME_IN_SECONDS",
    "PROPERTY_TRANSACTION_PREPARED_QUEUE_OFFSET": "TRAN_PREPARED_QUEUE_OFFSET",
    "PROPERTY_TRANSACTION_ID": "__transactionId__",
    "PROPERTY_TRANSACTION_CHECK_TIMES": "TRANSACTION_CHECK_TIMES",
    "PROPERTY_CLUSTER": "CLUSTER",
    "PROPERTY_TIMER_DELAY_SEC": "TIMER_DELAY_SEC",
    "PROPERTY_TIMER_DELIVER_MS": "TIMER_DELIVER_MS",
    "PROPERTY_TIMER_ENQUEUE_MS": "TIMER_ENQUEUE_MS",
    "PROPERTY_TIMER_DEQUEUE_MS": "TIMER_DEQUEUE_MS",
    "PROPERTY_TIMER_ROLL_TIMES": "TIMER_ROLL_TIMES",
    "PROPERTY_TIMER_OUT_MS": "TIMER_OUT_MS",
    "PROPERTY_TIMER_DEL_UNIQKEY": "TIMER_DEL_UNIQKEY",
    "PROPERTY_TIMER_DELAY_MS": "TIMER_DELAY_MS",
    "PROPERTY_DLQ_ORIGIN_TOPIC": "DLQ_ORIGIN_TOPIC",
    "PROPERTY_DLQ_ORIGIN_MESSAGE_ID": "DLQ_ORIGIN_MESSAGE_ID",
    "PROPERTY_RECONSUME_TIME": "RECONSUME_TIME",
    "PROPERTY_MAX_RECONSUME_TIMES": "MAX_RECONSUME_TIMES",
    "PROPERTY_POP_CK": "POP_CK",
    "PROPERTY_FIRST_POP_TIME": "1ST_POP_TIME",
}
STRINGS = {k: v for k, v in vars(names).items() if k.isupper() and isinstance(v, str)}
EXPORTED = {k for k in vars(names) if k.isupper()}
PREFIXES = (names.RETRY_GROUP_TOPIC_PREFIX, names.DLQ_GROUP_TOPIC_PREFIX, names.SYSTEM_TOPIC_PREFIX,
            names.REVIVE_TOPIC)
GROUPS = (names.CID_SYS_RMQ_TRANS, names.REVIVE_GROUP)
# One letter is a day unit or an index kind elsewhere: REMOVE_TAG counts as spelled only where it is
# compared with something or stored under the TAGS key.
SHORT = {v for v in STRINGS.values() if len(v) < 2}


def test_names_match_rocketmq():
    assert STRINGS == ROCKETMQ
    assert names.SYSTEM_TOPICS == ("SCHEDULE_TOPIC_XXXX", "rmq_sys_wheel_timer", "RMQ_SYS_TRANS_HALF_TOPIC",
                                   "RMQ_SYS_TRANS_OP_HALF_TOPIC", "TRANS_CHECK_MAX_TIME_TOPIC")


def _docstrings(tree: ast.AST) -> set[int]:
    out = set()
    for n in ast.walk(tree):
        if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body:
            first = n.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def _is_tags_key(node: ast.AST | None) -> bool:
    return ((isinstance(node, ast.Name) and node.id == "PROPERTY_TAGS")
            or (isinstance(node, ast.Attribute) and node.attr == "PROPERTY_TAGS")  # names.PROPERTY_TAGS
            or (isinstance(node, ast.Constant) and node.value == names.PROPERTY_TAGS))


def spellings(source: str) -> list[tuple[int, str]]:
    """(line, text) of every non-docstring string constant (f-string parts too) that spells a name."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    short_uses = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Compare):
            short_uses |= {id(x) for x in (n.left, *n.comparators) if isinstance(x, ast.Constant)}
        elif isinstance(n, ast.Dict):
            short_uses |= {id(v) for k, v in zip(n.keys, n.values, strict=True) if _is_tags_key(k)}
        elif isinstance(n, ast.Tuple) and len(n.elts) == 2 and _is_tags_key(n.elts[0]):
            short_uses.add(id(n.elts[1]))
    found = []
    for n in ast.walk(tree):
        if not isinstance(n, ast.Constant) or id(n) in docs or not isinstance(n.value, str | bytes):
            continue
        text = n.value.decode("latin-1") if isinstance(n.value, bytes) else n.value
        if text in SHORT:
            hit = id(n) in short_uses
        else:
            hit = (text in STRINGS.values() or text.startswith(PREFIXES)
                   or any(f"@{g}" in text for g in GROUPS))
        if hit:
            found.append((n.lineno, text))
    return found


def test_spellings_finds_keys_topics_and_fstring_parts():
    src = '''
"""Docstring naming UNIQ_KEY and SCHEDULE_TOPIC_XXXX is prose."""
def f(p, rec):
    """So is this: %RETRY%group."""
    a = p["DELAY"], p.get('REAL_TOPIC'), f"{p.get('REAL_QID')}/x", b"UNIQ_KEY"
    b = rec.topic.startswith("%DLQ%") or rec.tags != "d" or f"{rec.topic}@CID_RMQ_SYS_TRANS"
    c = {"TAGS": "d"}, ("s", "d"), f"d{a}", "DELAY=3 in prose", f"carries DELAY={a}"
    e = {names.PROPERTY_TAGS: "d"}
'''
    assert sorted(t for _, t in spellings(src)) == sorted(
        ["DELAY", "REAL_TOPIC", "REAL_QID", "UNIQ_KEY", "%DLQ%", "d", "@CID_RMQ_SYS_TRANS", "TAGS", "d", "d"])


def test_one_module_spells_the_names():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path != NAMES_PY:
            found += [f"{path.relative_to(PACKAGE.parent)}:{line}: {text!r}"
                      for line, text in spellings(path.read_text())]
    assert found == []


def test_names_are_imported_from_names_py_only():
    """No module defines, re-imports or re-exports a name of names.py under that name."""
    problems = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path == NAMES_PY:
            continue
        where = path.relative_to(PACKAGE.parent)
        for n in ast.parse(path.read_text()).body:
            if isinstance(n, ast.ImportFrom) and n.module != "mqtool.formats.names":
                problems += [f"{where}: imports {a.name} from {n.module}" for a in n.names if a.name in EXPORTED]
            if isinstance(n, ast.ImportFrom) and n.module == "mqtool.formats.names":
                problems += [f"{where}: renames {a.name}" for a in n.names if a.asname]
            if isinstance(n, ast.Assign | ast.AnnAssign):
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                for t in targets:
                    if isinstance(t, ast.Name) and t.id in EXPORTED:
                        problems.append(f"{where}: defines {t.id}")
                    if isinstance(t, ast.Name) and t.id == "__all__" and isinstance(n.value, ast.List | ast.Tuple):
                        problems += [f"{where}: exports {e.value}" for e in n.value.elts
                                     if isinstance(e, ast.Constant) and e.value in EXPORTED]
    assert problems == []
