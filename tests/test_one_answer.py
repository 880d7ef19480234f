"""Issue #27: one answer per question. For every store in fixtures/ and ../shared/oracle (and builder-made
stores for the cases the issue lists), every message in the delay, timer, transaction and retry topics gets
the same answer from trace, from the simulator over the next hours, and from the views (delay, timer,
transactions, retry, restart): same state (pending / delivered / cancelled / never), same due time.

`tests/oneanswer.py` computes the answers (one simulator run, one set of views per store, cached per
module); a failure lists every disagreement, one line per message.
"""

import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from oneanswer import KINDS, StoreAnswers  # noqa: E402
from oneanswer_stores import BUILT, CONFIG, T0  # noqa: E402

from conftest import FIXTURES, ORACLE, need_oracle  # noqa: E402
from mqtool.formats.broker_conf import BrokerConfig, load_broker_conf  # noqa: E402
from mqtool.store.store import Store  # noqa: E402

THREE_LEVELS = {"messageDelayLevel": "1s 5s 10s"}  # levels 4..18 are no longer configured
BASIC = {"mappedFileSizeCommitLog": "65536", "mappedFileSizeConsumeQueue": "1280", "mappedFileSizeTimerLog": "65536"}


@dataclass(frozen=True)
class Source:
    """Where a store comes from: a directory (fixtures/, the oracle), or a builder of `oneanswer_stores`."""

    path: Path | None = None
    conf: Path | None = None
    overrides: dict = field(default_factory=dict)
    version: str = "5.3"
    oracle: bool = False
    built: str | None = None


STORES = {
    name: Source(FIXTURES / name, FIXTURES / f"{name}.broker.conf")
    for name in ("demo", "crash", "batchcq", "compaction", "dledger", "pop")
}
STORES |= {
    f"{name}+3levels": Source(FIXTURES / name, FIXTURES / f"{name}.broker.conf", THREE_LEVELS)
    for name in ("demo", "crash", "pop")
}
STORES["basic-5.3.1"] = Source(None, None, BASIC, oracle=True)  # its wheel is gzipped: `basic_store` restores it
ORACLE_SIZES = {  # the oracle stores without a broker.conf: the file sizes their broker ran with
    "dledger-5.3.1": {"mappedFileSizeCommitLog": "16384", "mappedFileSizeConsumeQueue": "300"},
    "batchcq-5.3.1": {
        "mappedFileSizeCommitLog": "8192",
        "mappedFileSizeConsumeQueue": "300",
        "mapperFileSizeBatchConsumeQueue": "920",
    },
    "compaction-5.3.1": {"mappedFileSizeCommitLog": "16384", "mappedFileSizeConsumeQueue": "200"},
}
STORES |= {name: Source(ORACLE / name / "store", None, sizes, oracle=True) for name, sizes in ORACLE_SIZES.items()}
STORES |= {
    f"ha-async-5.3.1/{side}": Source(
        ORACLE / "ha-async-5.3.1" / side, ORACLE / f"ha-async-5.3.1/broker-{side}.conf", oracle=True
    )
    for side in ("master", "slave")
}
for _pair in ("pair_default", "pair-4.9", "retry-dlq-5.3.1", "pop-revive-5.3.1"):
    for _side in ("A", "B"):
        STORES[f"{_pair}/{_side}"] = Source(
            ORACLE / _pair / _side,
            ORACLE / _pair / "broker.conf",
            version="4.9" if _pair == "pair-4.9" else "5.3",
            oracle=True,
        )
STORES["pair_default/A+3levels"] = Source(
    ORACLE / "pair_default/A", ORACLE / "pair_default/broker.conf", THREE_LEVELS, oracle=True
)
STORES["pair-4.9/A+3levels"] = Source(
    ORACLE / "pair-4.9/A", ORACLE / "pair-4.9/broker.conf", THREE_LEVELS, version="4.9", oracle=True
)
STORES |= {name: Source(built=name) for name in BUILT}
STORES["retry-backlog+3levels"] = Source(overrides=THREE_LEVELS, built="retry-backlog")


# The messages each store holds, per kind (the enumerator's count, checked by `test_each_store_holds_...`): a
# (store, kind) pair with none is no case, so no case of `test_every_message_has_one_answer` passes empty.
KIND_COUNTS = {
    "demo": {"delay": 6, "retry": 2, "timer": 5, "transaction": 4},
    "crash": {"delay": 5, "timer": 3, "transaction": 3},
    "batchcq": {},
    "compaction": {},
    "dledger": {"delay": 2},
    "pop": {"timer": 5},
    "basic-5.3.1": {"delay": 4, "timer": 6, "transaction": 2},
    "dledger-5.3.1": {"delay": 4, "retry": 1},
    "batchcq-5.3.1": {},
    "compaction-5.3.1": {},
    "ha-async-5.3.1/master": {},
    "ha-async-5.3.1/slave": {},
    "pair_default/A": {"delay": 9, "timer": 7, "transaction": 6},
    "pair_default/B": {"delay": 9, "timer": 7, "transaction": 6},
    "pair-4.9/A": {"delay": 17, "transaction": 5},
    "pair-4.9/B": {"delay": 17, "transaction": 5},
    "retry-dlq-5.3.1/A": {},
    "retry-dlq-5.3.1/B": {"retry": 3},
    "pop-revive-5.3.1/A": {},
    "pop-revive-5.3.1/B": {"retry": 2, "timer": 7},
    "timer-cancels": {"timer": 6},
    "timer-empty-slot": {"timer": 2},
    "retry-backlog": {"retry": 2},
}


def _counts(name: str) -> dict[str, int]:
    return KIND_COUNTS[name.removesuffix("+3levels")]  # the same store with fewer delay levels


def _open(name: str, request, tmp_path_factory) -> Store:
    src = STORES[name]
    if src.oracle:
        need_oracle()
    if src.built is not None:
        root = BUILT[src.built](tmp_path_factory.mktemp("built") / "store")
        return Store.open(root, CONFIG.with_overrides(src.overrides) if src.overrides else CONFIG)
    path = request.getfixturevalue("basic_store") if name == "basic-5.3.1" else src.path
    cfg = load_broker_conf(src.conf) if src.conf is not None else BrokerConfig()
    return Store.open(path, cfg.with_overrides(src.overrides) if src.overrides else cfg)


@pytest.fixture(scope="module")
def answers(request, tmp_path_factory):
    cache: dict[str, StoreAnswers] = {}

    def get(name: str) -> StoreAnswers:
        if name not in cache:
            cache[name] = StoreAnswers.of(name, _open(name, request, tmp_path_factory), STORES[name].version)
        return cache[name]

    return get


def _cases(what):
    for name in STORES:
        for kind in what:
            if kind != "store" and not _counts(name).get(kind):
                continue
            marks = [pytest.mark.oracle] if STORES[name].oracle else []
            yield pytest.param(name, kind, marks=marks, id=f"{name}-{kind}")


@pytest.mark.parametrize("name, kind", list(_cases(KINDS)))
def test_every_message_has_one_answer(answers, name, kind):
    assert answers(name).disagreements(kind) == []


@pytest.mark.parametrize("name, kind", list(_cases(["store"])))
def test_the_store_has_one_answer(answers, name, kind):
    """One now for trace and the simulator, no simulator event of an unknown message, the views' counts
    (timer pending, never delivered) and the restart view's duplicates and rechecks as the simulator has them."""
    assert answers(name).store_disagreements() == []


def test_three_levels_make_demo_level_18_never_delivered(answers):
    """The case of the issue: levels 4..18 gone, D18 and D20 (level 18) are never delivered by any answer."""
    sa = answers("demo+3levels")
    never = sorted(m.rec.keys[0] for m in sa.messages.values() if m.trace.state == "never")
    assert never == ["D18", "D20"]
    assert all(
        sa.messages[m].view.state == "never" and not sa.messages[m].events
        for m in sa.messages
        if sa.messages[m].trace.state == "never"
    )


def test_retry_view_gives_no_due_for_a_level_no_longer_configured(answers):
    """retry-backlog with 3 levels: M2's level 5 is gone, so the retry view has no due time for it (it said
    "next due T0 + 62 s, overdue" before), M1's level 3 (10 s) is due at T0 + 1 s + 10 s."""
    backlog = answers("retry-backlog+3levels").views["retry"]["groups"][0]["backlog"]
    rows = {r["level"]: r for r in backlog["levels"]}
    gone = rows[5]
    assert (gone["delay_ms"], gone["count"], gone["next_due_ms"], gone["overdue_ms"]) == (None, 1, None, None)
    assert rows[3]["next_due_ms"] == backlog["next_due_ms"] == T0 + 11_000


def test_a_torn_delivery_is_no_delivery(answers):
    """crash: D1d's delivery X (12907) is torn; recovery ends the CommitLog there, so trace leaves it out and
    says overdue (due +9100 = the store's last activity), as the delay view and the simulator (re-put at
    start + 1 s, `first_delivery_after_start`) say; T30's unit points at the torn record Y: not pending."""
    sa = answers("crash")
    d1d = next(m for m in sa.messages.values() if m.rec.keys == ["D1d"])
    assert (d1d.trace.raw, d1d.trace.due, d1d.view.state) == ("overdue", 1790000009100, "pending")
    assert [(e.event, e.time) for e in d1d.events] == [("deliver", 1790000010100)]
    assert sa.views["timer"]["pending"]["count"] == 2  # T8 (read again: a duplicate) and T60


def test_trace_follows_a_pop_checkpoint_to_its_revive(answers):
    """pop: the ck of offset 3 (a text UNIQ_KEY) was delivered to the revive topic at +9210 (fixtures/layouts.md)."""
    ck = answers("pop").messages["POPTOPIC@0@3@GID_POP@1790000000200@BROKER-POP@CK"]
    assert (ck.trace.raw, ck.view.state, ck.events) == ("delivered", "done", [])
    assert ck.trace.text.startswith("delivered 2026-09-21T14:13:29.210Z to rmq_sys_REVIVE_LOG_DemoCluster/0@0")


@pytest.mark.parametrize("name, kind", list(_cases(["store"])))
def test_each_store_holds_the_messages_counted(answers, name, kind):
    """The enumerator finds exactly the messages counted in KIND_COUNTS: a store whose messages were lost
    would otherwise pass every case of it empty."""
    assert dict(Counter(m.kind for m in answers(name).messages.values())) == _counts(name)
