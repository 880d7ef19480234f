"""Issue #27: the timer view, the restart view, its replay and `spark-audit` give one answer.

One builder store (trace_stores.CONFIG: precision 1 s, roll window 100 s) with three timers written at
T0 + 10..12 ms, due T0 + 20 s, 40 s and 60 s: TimerLog units at 0, 52 and 104 in slots T0 + 19 s, 39 s,
59 s (an exact multiple is put one precision earlier), timercheck read time T0 + 5 s. Then the wheel
file is altered as a clean run can leave it:

- `empty`: the +40 s unit's slot is zeroed. The broker's recovery rebuilds it from the TimerLog
  (`recoverAndRevise` -> `reviseSlot` -> `putSlot(t, 52, 52)`, num 0), so all three are delivered.
- `num0`: that slot keeps its chain but num 0, which is what the rebuilt slot holds when the broker
  shuts down again: num only feeds the timer metrics, so it is info, at byte offset slot x 32 in both.
"""

import struct
import sys
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest

sys.path.insert(0, str(Path(__file__).parent.parent / "trace"))
from trace_stores import CONFIG, T0, props  # noqa: E402

from mqtool.audit.runner import run_local  # noqa: E402
from mqtool.builder import broker as b  # noqa: E402
from mqtool.builder.writer import StoreWriter  # noqa: E402
from mqtool.formats.broker_conf import ConfigFileError  # noqa: E402
from mqtool.formats.timerwheel import SLOT_SIZE, slot_index  # noqa: E402
from mqtool.inspect import load_schema  # noqa: E402
from mqtool.inspect.restart import restart_preview  # noqa: E402
from mqtool.inspect.timer import timer_view  # noqa: E402
from mqtool.store.store import Store  # noqa: E402

NOW = T0 + 5_000
SLOT = slot_index(T0 + 39_000, 1000)  # the +40 s timer's slot index


def _build(root: Path, alter: str) -> Path:
    with StoreWriter(root, CONFIG) as w:
        for i, d in enumerate((20_000, 40_000, 60_000)):
            b.put_timer_message(
                w, "TopicB", 0, b"t", props(f"t{i}", i + 1, TIMER_DELIVER_MS=str(T0 + d)), store_timestamp=T0 + 10 + i
            )
        w.write_timercheck(NOW, last_timer_queue_offset=3)
        w.write_checkpoint(physic_msg_timestamp=NOW)
    with open(root / "timerwheel", "r+b") as f:
        if alter == "empty":
            f.seek(SLOT * SLOT_SIZE)
            f.write(bytes(SLOT_SIZE))
        else:
            f.seek(SLOT * SLOT_SIZE + 24)  # num
            f.write(struct.pack(">i", 0))
    return root


@pytest.fixture(scope="module")
def stores(tmp_path_factory):
    base = tmp_path_factory.mktemp("recovered_wheel")
    return {k: Store.open(_build(base / k, k), CONFIG) for k in ("empty", "num0")}


def test_an_empty_slot_is_rebuilt_and_its_message_pending(stores):
    doc = timer_view(stores["empty"], NOW)
    assert doc["pending"]["count"] == 3  # was 2: the +40 s message was left out
    assert doc["pending"]["earliest_ms"] == T0 + 19_000 and doc["pending"]["latest_ms"] == T0 + 59_000
    rebuilt = [s for s in doc["slots"] if s.get("revised_by_recovery")]
    assert [
        (s["index"], s["time_ms"], s["first_pos"], s["last_pos"], s["num"], s["chain_length"]) for s in rebuilt
    ] == [(SLOT, T0 + 39_000, 52, 52, 0, 1)]
    assert [(f["file"], f["offset"], f["severity"]) for f in doc["findings"]] == [("timerwheel", SLOT * 32, "info")]
    jsonschema.validate(doc, load_schema("timer"))
    chain = timer_view(stores["empty"], NOW, at_ms=T0 + 39_500)["chain"]
    assert [(u["pos"], u["state"]) for u in chain["units"]] == [(52, "pending")]


def test_spark_audit_reports_the_rebuilt_slot_as_inspect_does(stores):
    report = run_local(stores["empty"])
    audit = [(f["file"], f["offset"], f["severity"], f["message"]) for f in report["findings"] if f["check"] == "timer"]
    doc = timer_view(stores["empty"], NOW)
    assert audit == [(f["file"], f["offset"], f["severity"], f["message"]) for f in doc["findings"]]
    assert audit[0][3] == (
        f"wheel slot {SLOT} (time {T0 + 39_000}): the wheel file does not hold this slot of TimerLog unit(s) up "
        "to 52; the broker rebuilds it when it recovers (recoverAndRevise -> reviseSlot)"
    )
    assert report["summary"]["timer"]["pending_messages"] == 3  # the rebuilt slot's unit counted


def test_restart_pending_equals_what_its_replay_delivers(stores):
    doc = restart_preview(stores["empty"], at_ms=NOW, for_ms=120_000)
    assert doc["late"]["timer"]["pending"] == 3
    assert doc["replay"]["counts"]["timer deliver"] == 3


def test_num_zero_under_a_chain_of_one_is_graded_once(stores):
    doc = timer_view(stores["num0"], NOW)
    assert doc["pending"]["count"] == 3
    inspect = [(f["file"], f["offset"], f["severity"], f["message"]) for f in doc["findings"]]
    report = run_local(stores["num0"])
    audit = [(f["file"], f["offset"], f["severity"], f["message"]) for f in report["findings"] if f["check"] == "timer"]
    want = (
        "timerwheel",
        SLOT * 32,
        "info",
        f"wheel slot {SLOT} (time {T0 + 39_000}, pending): num 0 but its chain counts 1 (normal + roll - delete); "
        "num only feeds the timer metrics",
    )
    assert inspect == [want] and audit == [want]
    assert not [f for f in report["findings"] if f["severity"] == "error"]
    assert report["summary"]["timer"]["pending_messages"] == 3  # was 2: the slot's num, not its chain


@pytest.mark.parametrize("precision", [0, -1000])
def test_a_precision_the_broker_cannot_run_with_is_a_config_error(stores, precision):
    store = Store.open(stores["num0"].root, replace(CONFIG, timer_precision_ms=precision))
    with pytest.raises(ConfigFileError, match=f"timerPrecisionMs = {precision}"):
        timer_view(store, NOW)
    with pytest.raises(ConfigFileError, match=f"timerPrecisionMs = {precision}"):
        run_local(store)


@pytest.mark.parametrize("command", ["simulate", "inspect", "spark-audit"])
def test_the_cli_says_so_in_one_line_and_exits_2(stores, tmp_path, command):
    from typer.testing import CliRunner

    from mqtool.cli.app import app

    conf = tmp_path / "broker.conf"
    conf.write_text("timerPrecisionMs=0\n")
    store = str(stores["num0"].root)
    args = {
        "simulate": ["simulate", store, "--until", "+1h", "--config", str(conf)],
        "inspect": ["inspect", store, "timer", "--config", str(conf), "--now", str(NOW)],
        "spark-audit": ["spark-audit", store, "--local", "--config", str(conf)],
    }[command]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 2, (r.output, r.exception)
    assert r.stderr.startswith("Error: timerPrecisionMs = 0: the broker's timer cannot run with it")
    assert r.stderr.count("\n") == 1
