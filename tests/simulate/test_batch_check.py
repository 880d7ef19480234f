"""A check round's batch walk over the halves it discards, skips or puts back
(`TransactionService._check_batch`) writes the same event log, byte for byte, and the same summary as
the per-message walk (`reference_transaction`): on a store of plain halves (checked round after round until
discarded) mixed
with halves the per-message walk must take (immune, new, done by an op record, a fresh put-back,
an unparsable TRANSACTION_CHECK_TIMES, born too long ago, non-ASCII keys), with producer answers
(the seeded random draws in the same order), on a 4.9 broker, in a streaming run that releases
what it read, and with a put-failure fault (a refused put cuts the batch; a refused commit)."""

import io
import json

import pytest
from reference_transaction import ReferenceTransaction

import mqtool.simulate.runner as runner_mod
from mqtool.builder.broker import put_half_message, put_op_message
from mqtool.builder.writer import StoreWriter
from mqtool.formats.broker_conf import BrokerConfig
from mqtool.simulate.runner import simulate
from mqtool.simulate.scenario import parse_scenario
from mqtool.simulate.transaction import TransactionService
from mqtool.store.store import Store

START = 1_800_000_000_000
ANSWERS = {
    "transaction": {
        "answers": [
            {"key": "order-*", "answer": "commit", "probability": 0.5},
            {"producer_group": "PG", "answer": "rollback", "probability": 0.3},
        ],
        "answer_delay_ms": 500,
    }
}


def _build(root, n=300, version="5.3"):
    config = BrokerConfig.for_version(version)
    done = []
    with StoreWriter(root, config, version) as w:
        for i in range(n):
            born = START - 100_000 + i
            props = [("UNIQ_KEY", f"H{i:05d}"), ("KEYS", f"order-{i}" if i % 7 else "ключ é")]
            if i % 50 == 11:
                props.append(("CHECK_IMMUNITY_TIME_IN_SECONDS", "200"))  # immune for the first rounds
            if i % 50 == 23:
                props.append(("TRANSACTION_CHECK_TIMES", "x"))  # getInt -1: counts from 0
            if i % 50 == 31:
                born = START - 80 * 3600 * 1000  # past fileReservedTime: skipped
            if i % 50 == 37:
                born = START + 40_000  # stored during the run: new, then fresh in the first round
            h = put_half_message(
                w,
                "TxTopic",
                i % 3,
                b"h" * (i % 4),
                props,
                store_timestamp=max(born, START - 90_000) if i % 50 != 37 else born,
                born_timestamp=born,
                producer_group="PG",
            )
            if i % 9 == 4:
                done.append(h.queue_offset)
        for ops in [done] if w.v5 else [[d] for d in done]:  # 4.x: one half offset per op record
            put_op_message(w, ops, store_timestamp=START - 50_000)
        w.write_checkpoint()
    return Store.open(root, config), config


@pytest.fixture(scope="module")
def store53(tmp_path_factory):
    """The 5.3 store every test here walks (read only: built once for the module)."""
    return _build(tmp_path_factory.mktemp("s5"))


@pytest.fixture(scope="module")
def store49(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("s4"), version="4.9.8")


def _run(store, config, reference, monkeypatch, doc=None, version="5.3", hold=None):
    monkeypatch.setattr(runner_mod, "TransactionService", ReferenceTransaction if reference else TransactionService)
    doc = {"broker": {"transactionCheckMax": 3}, **(doc or {})}
    sink = io.StringIO()
    res = simulate(
        store,
        config,
        START,
        START + 400_000,
        parse_scenario(doc, START),
        seed=7,
        broker_version=version,
        sink=sink,
        hold_events=hold,
    )
    return sink.getvalue(), res


def _same(store, config, monkeypatch, **kw):
    log1, r1 = _run(store, config, True, monkeypatch, **kw)
    log2, r2 = _run(store, config, False, monkeypatch, **kw)
    same = log2 == log1  # not `assert log2 == log1`: pytest's diff of two long logs takes minutes
    assert same
    assert r2.summary == r1.summary and r2.violations == r1.violations
    return log1


def test_batch_checks_and_discards_as_the_per_message_walk(store53, monkeypatch):
    store, config = store53
    log = _same(store, config, monkeypatch, hold=True)
    checks = log.count('"service":"transaction","event":"check"')
    # 300 halves: 33 done by the op record (i % 9 == 4), 5 born 80 h ago skipped (i % 50 == 31 but for
    # i = 31, done), the other 262 checked until TRANSACTION_CHECK_TIMES reaches 3, then discarded
    assert log.count('"event":"skip"') == 5
    assert log.count('"event":"discard"') == 262
    assert log.count('"event":"put_back"') > 0  # the immune halves' re-puts
    assert checks > 3 * 262 - 262 // 50 * 2  # (the immune ones are still immune for their first rounds)


def test_batch_with_answers_draws_the_same(store53, monkeypatch):
    store, config = store53
    log = _same(store, config, monkeypatch, doc=ANSWERS, hold=True)
    assert '"event":"commit"' in log and '"event":"rollback"' in log


def test_batch_on_49_and_streaming(store53, store49, monkeypatch):
    store, config = store49
    log = _same(store, config, monkeypatch, version="4.9", hold=True)
    assert '"event":"check"' in log
    store, config = store53
    log = _same(store, config, monkeypatch, hold=False)  # releasing: records dropped once read
    assert log.count('"event":"check"') > 600


def test_batch_under_a_put_failure(store53, monkeypatch):
    store, config = store53
    doc = {
        **ANSWERS,
        "faults": [
            {"kind": "put_failure", "from": "+60s", "until": "+100s", "service": "transaction", "probability": 0.5}
        ],
    }
    log = _same(store, config, monkeypatch, doc=doc, hold=True)
    assert log.count('"event":"put_failed"') > 10  # each refused put cuts the batch, the same step goes on
    failed = [e["reason"] for e in map(json.loads, log.splitlines()) if e["event"] == "put_failed"]
    assert "commit" in failed  # an answer's commit refused too


def test_an_immune_half_is_done_by_the_op_record_of_its_prepared_offset(tmp_path, monkeypatch):
    """`checkPrepareQueueOffset`: immune half 0 with TRAN_PREPARED_QUEUE_OFFSET 2, which the op record names, is
    done by it (no event, no put-back); half 2 is then visited as any other (its removeMap entry was taken) and
    checked, as half 1."""
    config = BrokerConfig.for_version("5.3")
    with StoreWriter(tmp_path / "s", config, "5.3") as w:
        for i in range(3):
            props = [("UNIQ_KEY", f"P{i}")]
            if i == 0:
                props += [("CHECK_IMMUNITY_TIME_IN_SECONDS", "200"), ("TRAN_PREPARED_QUEUE_OFFSET", "2")]
            stored = START - 60_000  # immune for 200 s; the others due (past transactionTimeOut)
            put_half_message(w, "T", 0, b"p", props, store_timestamp=stored, born_timestamp=stored, producer_group="G")
        put_op_message(w, [2], store_timestamp=START - 50_000)
        w.write_checkpoint()
    log, res = _run(Store.open(tmp_path / "s", config), config, False, monkeypatch, {"transaction": {"check_at": [0]}})
    events = [(e["event"], e["uniq_key"]) for e in map(json.loads, log.splitlines()) if e["service"] == "transaction"]
    assert events == [("check", "P1"), ("check", "P2")], events
    assert [h["uniq_key"] for h in res.summary["pending_halves"]] == ["P1", "P2"]  # their copies; P0 passed
    assert _same(Store.open(tmp_path / "s", config), config, monkeypatch, doc={"transaction": {"check_at": [0]}})


def test_deferred_put_backs_read_as_the_per_message_walk_made_them(store53, store49, monkeypatch):
    """A run that keeps no records for `--out` (no held events) places the put-backs without a `SimMessage`
    (`StoreModel.lazy`); the ones read again (an answer's end-transaction, a discard or skip where the
    queue keeps records) are built then and must read as the per-message walk's own copies: same log, same
    summary, with answers, on 5.3 and 4.9."""
    # fixed seed 7: the answers' draws give 245 ends of 393 checks on 5.3, 244 of 402 on 4.9
    want = {"5.3": (245, 393), "4.9": (244, 402)}
    for (store, config), broker in ((store53, "5.3"), (store49, "4.9")):
        log = _same(store, config, monkeypatch, doc=ANSWERS, version=broker, hold=False)
        ends = log.count('"event":"commit"') + log.count('"event":"rollback"')
        assert (ends, log.count('"event":"check"')) == want[broker]
