"""Scenario files: every key is read by the typed reader of its kind of value, and a bad key or value is one
`ScenarioError` naming it (the CLI prints it as one `Error:` line, exit 2: tests/cli/test_simulate_cli.py)."""

import pytest

from mqtool.simulate.scenario import Fault, ScenarioError, parse_scenario

S = 1_800_000_000_000


def test_values_are_read_by_kind():
    sc = parse_scenario(
        {
            "transaction": {"check_at": ["+10s", 3000], "answer_delay_ms": "1s", "default_answer": "commit"},
            "faults": [
                {"kind": "clock_jump", "at": "+2s", "delta": "-30s"},
                {"kind": "put_failure", "from": S + 5, "probability": 0.5, "service": "timer"},
                {"kind": "crash", "from": 7, "until": "+9s"},
            ],
        },
        S,
    )
    # an integer below 10^11 is ms after the start, from 10^11 on epoch ms; the rounds sorted
    assert sc.check_at == [S + 3000, S + 10_000] and (sc.answer_delay_ms, sc.default_answer) == (1000, "commit")
    assert sc.faults == [
        Fault("clock_jump", S + 2000, S + 2000, delta=-30_000),
        Fault("put_failure", S + 5, 2**62, 0.5, "timer"),  # lasts to the end of the run
        Fault("crash", S + 7, S + 9000),
    ]


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"faults": [{"kind": "crash", "form": "+1s"}]}, r"faults\[0\]: unknown key\(s\) form"),
        ({"faults": [{"kind": "crash"}]}, r"faults\[0\]: a crash needs `from`"),
        ({"faults": [{"kind": "clock_jump", "at": 5}]}, r"faults\[0\]: a clock_jump needs `delta`"),
        ({"faults": [{"kind": "crash", "from": "+5s", "until": "+1s"}]}, r"faults\[0\]: until is before from"),
        ({"faults": [{"kind": "crash", "from": True}]}, r"faults\[0\].from: expected a time, got True"),
        ({"faults": [{"from": 1}]}, r"faults\[0\].kind is required"),
        ({"faults": [{"kind": "put_failure", "topic": 3}]}, r"faults\[0\].topic must be a name"),
        ({"transaction": {"answer_delay_ms": "soon"}}, r"transaction.answer_delay_ms: "),
        ({"transaction": {"check_at": "+1s"}}, r"transaction.check_at must be a list of times"),
        ({"transaction": {"answers": [{"key": "k*"}]}}, r"transaction.answers\[0\].answer is required"),
        ({"consumers": [{"group": "G", "topic": "T", "match": {"tags": "a"}}]}, r"consumers\[0\].match: unknown"),
        ({"consumers": [{"group": "G", "topic": "T", "poll_interval": -1}]}, r"poll_interval must be at least 0"),
        ({"broker": 1}, r"broker must be a table"),
        ({"brokers": {}}, r"scenario: unknown key\(s\) brokers"),
    ],
)
def test_a_bad_key_or_value_is_named(doc, message):
    with pytest.raises(ScenarioError, match=message):
        parse_scenario(doc, S)
