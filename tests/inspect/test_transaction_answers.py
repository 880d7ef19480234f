"""One answer per transaction question (issue 27): `inspect transactions`, `inspect restart` and the replay agree.

Values worked out by hand from the stores' stories (`mqtool.builder.crash`, the oracle pairs' READMEs) and
TransactionalMessageServiceImpl.check.
"""

import json
from dataclasses import replace

import pytest

from conftest import ORACLE, need_oracle
from mqtool.builder.crash import build_crash, crash_config
from mqtool.builder.demo import T0
from mqtool.inspect.restart import restart_preview
from mqtool.inspect.transactions import transactions_view
from mqtool.store.store import Store

AT = T0 + 120_000  # the crash store's restart, as tests/inspect/test_restart.py takes it
INTERVAL = 6000  # crash.broker.conf: transactionCheckInterval (transactionTimeOut 3000, transactionCheckMax 5)


@pytest.fixture(scope="module")
def crash(tmp_path_factory):
    root = tmp_path_factory.mktemp("crash") / "store"
    records = build_crash(root)
    return Store.open(root, crash_config()), records


@pytest.fixture(scope="module")
def preview(crash, tmp_path_factory):
    store, _ = crash
    events = tmp_path_factory.mktemp("events") / "ev.jsonl"
    return restart_preview(store, None, AT, 600_000, events), events


def _rows(doc: dict) -> dict[str, dict]:
    return {h["keys"][0]: h for h in doc["half_messages"]}


def test_committed_half_read_again_is_checked_again_in_both_views(crash, preview):
    store, _ = crash
    doc, _ = preview
    rows = _rows(transactions_view(store, AT))
    # consumerOffset.json's half offset 0, op offset 0; op "1," covers H2, op "3," H1's copy, nothing covers H1
    # itself (queue offset 0): the first round (AT + 6 s) reads it, needDiscard puts 1; the round read op
    # records, so isNeedCheck is false: it reads more, finds none, 5.3.1 sleeps 1 s, then checks it (AT + 7 s);
    # the producer that committed answers COMMIT again
    h1 = rows["H1"]
    assert h1["state"] == "committed"
    assert h1["prediction"] == {
        "next_check_ms": AT + INTERVAL + 1000,
        "discard_ms": None,
        "checks_before_discard": 1,
        "discard_reason": None,
    }
    assert any("checked again" in n for n in h1["notes"])
    dup = next(d for d in doc["duplicates"] if d["kind"] == "transaction")
    assert (dup["uniq_key"], dup["again_at_ms"]) == (h1["uniq_key"], AT + 7000)
    first = {t["uniq_key"]: t for t in doc["transactions"]["first_rounds"]}
    assert first[h1["uniq_key"]]["next_check_ms"] == AT + 7000 and first[h1["uniq_key"]]["state"] == "committed"
    # H2: committed and its op covers queue offset 1: never read again
    assert rows["H2"]["prediction"] is None


def test_pending_half_discarded_in_the_round_the_replay_discards_it(crash, preview):
    store, _ = crash
    doc, events = preview
    h3 = _rows(transactions_view(store, AT))["H3"]
    # H3 (queue offset 2, no count) and its copy (4, count 1) are both read each round: two chains of copies,
    # counts 1|2, 2|3, 3|4, 4|5 in rounds 1-4; in round 4 the walk stops at the first copy it wrote
    # (count 4, "fresh stored") before the count-5 copy behind it, which round 5 discards: 9 checks. Each
    # round reads the op record of H1's answer from the round before and sleeps 1 s (5.3.1), and the next
    # starts 6 s after it ended: rounds check at +7, +14, +20, +26, +32 s
    assert h3["prediction"] == {
        "next_check_ms": AT + 7000,
        "discard_ms": AT + 32_000,
        "checks_before_discard": 9,
        "discard_reason": "TRANSACTION_CHECK_TIMES reached transactionCheckMax",
    }
    tx = [json.loads(line) for line in events.read_text().splitlines()]
    tx = [e for e in tx if e["service"] == "transaction" and e["uniq_key"] == h3["uniq_key"]]
    rounds = sorted({e["time"] for e in tx if e["event"] == "check"})
    discards = sorted({e["time"] for e in tx if e["event"] == "discard"})
    # the replay: 4 rounds of 2 checks, then the 5th round checks once more and discards
    assert rounds == [AT + 7000, AT + 14_000, AT + 20_000, AT + 26_000, AT + 32_000] and discards == [AT + 32_000]
    assert sum(e["event"] == "check" for e in tx) == 9
    to_discard = {t["uniq_key"]: t for t in doc["transactions"]["to_discard"]}
    assert to_discard[h3["uniq_key"]]["discard_outcomes"] == [AT + 32_000]


@pytest.mark.parametrize("version, outcomes, first", [("4.9", [30_000, 45_000], 15_000), ("5.3", [31_000], 16_000)])
def test_the_49_discard_race_gives_both_outcomes(open_oracle, version, outcomes, first):
    # pair-4.9/A: H3, H4, H5 pending, never checked; transactionCheckMax 2, interval 15 s. Round 1 checks
    # each (count 1); round 2 checks each again (count 2) and reaches the copies it wrote: discarded in that
    # round when the reput dispatch wins, else in round 3 (the README: both seen on 4.9.8). The op records
    # of H1/H2 are read in round 1: 5.3.1 sleeps 1 s there, so its rounds come 1 s later; a single time
    store = open_oracle("pair-4.9/A")
    doc = restart_preview(store, None, None, replay=False, broker_version=version)
    at = doc["at_ms"]
    got = {
        t["keys"][0]: ([x - at for x in t["discard_outcomes"]], t["next_check_ms"] - at)
        for t in doc["transactions"]["to_discard"]
    }
    assert got == {k: (outcomes, first) for k in ("H3", "H4", "H5")}
    lines = dict(doc["text"])["transactions"]
    either = [line for line in lines if line.startswith("discard:") and "either at" in line]
    assert len(either) == (3 if version == "4.9" else 0)
    if version == "4.9":
        assert f"either at {at + 30_000} " in either[0] and f"or at {at + 45_000} " in either[0]


def test_immune_half_discarded_without_a_check(open_oracle):
    # pair_default/A: H6immune60 (CHECK_IMMUNITY_TIME_IN_SECONDS=60) is put back twice within its immunity
    # (counts 1, 2) and its count-2 copy is discarded in round 2: no check request (the README)
    # (5.3.1: the op record "0,1," read in round 1 costs a 1 s sleep, so round 2 comes at +31 s)
    rows = _rows(transactions_view(open_oracle("pair_default/A"), 1795376096933))
    assert rows["H6immune60"]["prediction"] == {
        "next_check_ms": None,
        "discard_ms": 1795376096933 + 31_000,
        "checks_before_discard": 0,
        "discard_reason": "TRANSACTION_CHECK_TIMES reached transactionCheckMax",
    }


def test_transaction_check_max_below_one_is_a_warning_and_runs_as_the_broker_would(crash):
    store, _ = crash
    odd = Store.open(store.root, replace(crash_config(), transaction_check_max=-5))
    doc = transactions_view(odd, AT)
    assert [(f["check"], f["severity"], f["file"]) for f in doc["findings"]] == [
        ("transactions.settings", "warning", "broker.conf")
    ]
    assert "transactionCheckMax=-5" in doc["findings"][0]["message"]
    # round 1 (AT + 6 s, + 1 s sleep after reading the op records): H3 (no count) is checked (count 1); its copy
    # at queue offset 4 (count 1 >= -5) is discarded in the same round, before the walk reaches the new copies
    assert _rows(doc)["H3"]["prediction"] == {
        "next_check_ms": AT + 7000,
        "discard_ms": AT + 7000,
        "checks_before_discard": 1,
        "discard_reason": "TRANSACTION_CHECK_TIMES reached transactionCheckMax",
    }
    assert transactions_view(store, AT)["findings"] == []


def test_halves_the_rounds_passed_are_never_read_again(open_oracle):
    # pair_default/B: consumerOffset.json's half offset 14 = the half queue's max: nothing is read again
    doc = transactions_view(open_oracle("pair_default/B"), 1795376251537)
    assert [h["prediction"] for h in doc["half_messages"]] == [None] * 6


def test_pair_49_predictions_against_the_real_rounds(open_oracle):
    # pair-4.9/B.manifest.json, from T_servicesStartedMs: round 0 at +15.0 s sent the requests at +15.16 s
    # (4.9.8 reads on at once when no op record comes: no 1 s sleep), round 1 at +30.08 s discarded at
    # +30.09..30.16 s (the dispatch won; three other runs: +45.6 s, the round after)
    need_oracle()
    manifest = json.loads((ORACLE / "pair-4.9/B.manifest.json").read_text())
    start = manifest["T_servicesStartedMs"]
    rows = _rows(transactions_view(open_oracle("pair-4.9/A"), start, v4=True))
    requests = {r["label"]: r["requestTimeMs"] for r in manifest["checkRoundsDetail"][0]["requests"]}
    discards = {d["label"]: d["timeMs"] for d in manifest["checkDiscards"]}
    for label in ("H3", "H4", "H5"):
        p = rows[label]["prediction"]
        assert (p["next_check_ms"], p["discard_ms"], p["checks_before_discard"]) == (start + 15_000, start + 30_000, 2)
        assert 0 <= requests[label] - p["next_check_ms"] < 200 and 0 <= discards[label] - p["discard_ms"] < 200


STORES = [
    "fixtures/demo",
    "fixtures/crash",
    "pair_default/A",
    "pair_default/B",
    "pair-4.9/A",
    "pair-4.9/B",
    "basic-5.3.1/store",
]


def _open(name: str, tmp_path):
    from conftest import FIXTURES, copy_with_wheel
    from mqtool.formats.broker_conf import load_broker_conf

    if name.startswith("fixtures/"):
        kind = name.split("/")[1]
        return Store.open(FIXTURES / kind, load_broker_conf(FIXTURES / f"{kind}.broker.conf"))
    need_oracle()
    root = ORACLE / name
    if name.startswith("basic"):
        root = copy_with_wheel(root, tmp_path / "basic")
    conf = ORACLE / name.split("/")[0] / "broker.conf"
    return Store.open(root, load_broker_conf(conf) if conf.is_file() else None)


@pytest.mark.parametrize("version", ["5.3", "4.9"])
@pytest.mark.parametrize("name", STORES)
def test_every_prediction_is_what_the_replay_does(name, version, tmp_path):
    """For every transaction of every fixture and shared store: the view's next check and discard are the
    replay's first check request and first discard of it (the replay's producers answer a committed or
    rolled back transaction as before, as the restart view's does); a transaction without a prediction
    gets neither."""
    from mqtool.simulate import simulate
    from mqtool.simulate.scenario import AnswerRule, Scenario

    store = _open(name, tmp_path)
    at = store.last_activity_ms()
    horizon = 20 * store.config.transaction_check_interval
    doc = transactions_view(store, at, v4=version == "4.9")
    answers = [
        AnswerRule({"committed": "commit", "rolled_back": "rollback"}[r["state"]], uniq_key=r["uniq_key"])
        for r in doc["half_messages"]
        if r["state"] in ("committed", "rolled_back")
    ]
    events = simulate(store, store.config, at, at + horizon, Scenario(answers=answers), 0, version).events
    first: dict[tuple[str, str], int] = {}
    for e in events:
        if e.service == "transaction" and e.event in ("check", "discard", "skip"):
            first.setdefault((e.uniq_key, "check" if e.event == "check" else "discard"), e.time)
    for r in doc["half_messages"]:
        p = r["prediction"] or {}
        for kind, predicted in (("check", p.get("next_check_ms")), ("discard", p.get("discard_ms"))):
            if predicted is not None and predicted > at + horizon:
                continue
            assert first.get((r["uniq_key"], kind)) == predicted, (r["keys"], kind)


@pytest.mark.parametrize("name", STORES)
def test_trace_gives_the_views_answer(name, tmp_path):
    """trace's verdict of every transaction takes the view's row: a pending one is due at the view's next check
    (or discard), a committed or rolled back one the rounds read again says when it is checked again."""
    from mqtool.trace import TraceQuery, trace

    store = _open(name, tmp_path)
    at = store.last_activity_ms()
    for r in transactions_view(store, at)["half_messages"]:
        if not r["uniq_key"]:
            continue
        verdict = trace(store, TraceQuery(uniq_key=r["uniq_key"]), as_of=at)[0].verdict
        p = r["prediction"] or {}
        assert verdict.state == r["state"], r["keys"]
        if r["state"] == "pending":
            assert verdict.due == (p.get("next_check_ms") or p.get("discard_ms")), r["keys"]
        elif r["state"] in ("committed", "rolled_back"):
            assert ("checked at" in verdict.text) == (p.get("next_check_ms") is not None), r["keys"]


def test_cli_restart_with_broker_version_49_shows_both_discard_times():
    from typer.testing import CliRunner

    from mqtool.cli.app import app

    need_oracle()
    pair = ORACLE / "pair-4.9"
    at = 1795379319202  # A's last sign of life
    args = [
        "inspect",
        str(pair / "A"),
        "restart",
        "--config",
        str(pair / "broker.conf"),
        "--now",
        str(at),
        "--for",
        "1m",
        "--broker-version",
        "4.9",
    ]
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.output)
    assert {tuple(t["discard_outcomes"]) for t in doc["transactions"]["to_discard"]} == {(at + 30_000, at + 45_000)}
    res = CliRunner().invoke(app, args, env={"COLUMNS": "250"})
    assert res.exit_code == 0 and res.output.count("either 2026-11-22T20:29:09.202Z or") == 3, res.output
    res = CliRunner().invoke(app, ["inspect", str(pair / "A"), "delay", "--broker-version", "4.9"])
    assert res.exit_code == 2 and "--broker-version applies to the transactions and restart views" in res.output
