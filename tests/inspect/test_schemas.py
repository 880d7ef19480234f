"""Every JSON output, on every oracle store and the demo fixture, validates against mqtool/schemas/."""

import json

import jsonschema
import pytest

from conftest import ORACLE_STORES
from mqtool.inspect import load_schema
from mqtool.inspect.consumers import consumers_view
from mqtool.inspect.delay import delay_view
from mqtool.inspect.dump import dump_file
from mqtool.inspect.messages import MessageQuery, iter_messages, message_at
from mqtool.inspect.overview import overview
from mqtool.inspect.queue import iter_queue
from mqtool.inspect.records import record_dict
from mqtool.inspect.restart import restart_preview
from mqtool.inspect.timer import timer_view
from mqtool.inspect.transactions import transactions_view

NAMES = ("overview", "messages", "message", "queue", "delay", "timer", "transactions", "dump", "restart", "consumers")


@pytest.fixture(scope="module")
def validators() -> dict[str, jsonschema.Draft202012Validator]:
    out = {}
    for name in NAMES:
        schema = load_schema(name)
        jsonschema.Draft202012Validator.check_schema(schema)
        out[name] = jsonschema.Draft202012Validator(schema)
    return out


def check(validators, name: str, doc: dict) -> None:
    validators[name].validate(json.loads(json.dumps(doc)))  # exactly what --json prints


@pytest.fixture(params=["demo", *sorted(ORACLE_STORES)])
def any_store(request, open_oracle, demo_dir, demo_conf):
    if request.param == "demo":
        from mqtool.formats.broker_conf import load_broker_conf
        from mqtool.store.store import Store

        return Store.open(demo_dir, load_broker_conf(demo_conf))
    return open_oracle(ORACLE_STORES[request.param][0])


def test_every_view_matches_its_schema(any_store, validators):
    s = any_store
    now = 1795362444000
    check(validators, "overview", overview(s, now))
    check(validators, "delay", delay_view(s, now))
    check(validators, "timer", timer_view(s, now, at_ms=now))
    for slot in timer_view(s, now)["slots"]:
        check(validators, "timer", timer_view(s, now, at_ms=slot["time_ms"]))
    check(validators, "transactions", transactions_view(s, now))
    check(validators, "consumers", consumers_view(s, now))
    check(validators, "restart", restart_preview(s, None, now, 60_000))
    records = list(iter_messages(s, MessageQuery()))
    assert records
    for r in records:
        check(validators, "messages", record_dict(r, "base64", decompress_body=True))
    for r in records[:: max(1, len(records) // 10)]:
        check(validators, "message", message_at(s, r.physical_offset))
    for t, q in s.queue_ids:
        for row in iter_queue(s, t, q, body="none"):
            check(validators, "queue", row)
            assert row["match"], row["problems"]


def test_every_dump_matches_its_schema(any_store, validators):
    root = any_store.root
    files = [p for sub in ("commitlog", "timerlog", "config", "index") if (root / sub).is_dir()
             for p in sorted((root / sub).iterdir())]
    files += [p for p in (root / "checkpoint", root / "timerwheel", root / "timerwheel.gz") if p.is_file()]
    files += [next(q.queue.files[0].path for q in any_store.consume_queues())]
    kinds = set()
    for p in files:
        doc = dump_file(p, limit=5, body="hex")
        check(validators, "dump", doc)
        kinds.add(doc["kind"])
    assert {"commitlog", "consumequeue", "checkpoint"} <= kinds
    assert "index" in kinds or not (root / "index").is_dir()


def test_a_queue_line_without_its_record_matches_the_schema(validators):
    from mqtool.inspect.records import empty_record_dict

    row = {**empty_record_dict(), "cq_topic": "T", "cq_queue_id": 0, "cq_queue_offset": 0,
           "cq_commitlog_offset": 5, "cq_size": 10, "cq_tags_code": 0, "match": False, "problems": ["no record"]}
    check(validators, "queue", row)
