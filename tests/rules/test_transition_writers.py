"""Only `mqtool/rules` (and `mqtool/formats`, which spells the names) writes the broker's transition
properties (issue 27): TRANSACTION_CHECK_TIMES, TIMER_ROLL_TIMES, TIMER_ENQUEUE_MS, TIMER_DEQUEUE_MS.

A module that wrote one itself would be a second copy of the transition (`needDiscard`'s count, the timer's
`convert`); they read them through `rules.transaction.check_times_of` / `rules.timer`'s readers, and write
them through `put_check_times` / `convert_properties`. (`tests/rules/test_timer_rules.py` goes further for the
timer's three: no other module even names their constants.)
"""

import re
from pathlib import Path

import mqtool

ROOT = Path(mqtool.__file__).parent
# a subscript assignment, a dict display entry or a setdefault, with the name or its text
_PROPS = "(TRANSACTION_CHECK_TIMES|TIMER_ROLL_TIMES|TIMER_ENQUEUE_MS|TIMER_DEQUEUE_MS)"
_KEY = rf"(PROPERTY_{_PROPS}|[\"']{_PROPS}[\"'])"
WRITES = re.compile(rf"{_KEY}\s*(\]\s*=[^=]|:)|setdefault\(\s*{_KEY}")


def _writers() -> list[str]:
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT)
        if rel.parts[0] in ("rules", "formats"):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if WRITES.search(code):
                out.append(f"{rel}:{n}: {line.strip()}")
    return out


def test_no_module_outside_rules_writes_a_transition_property():
    assert _writers() == []


def test_the_pattern_finds_each_way_of_writing_it():
    for code in (
        'props[PROPERTY_TRANSACTION_CHECK_TIMES] = "1"',
        "{**p, PROPERTY_TRANSACTION_CHECK_TIMES: t}",
        'p["TRANSACTION_CHECK_TIMES"] = t',
        'p.setdefault(PROPERTY_TRANSACTION_CHECK_TIMES, "1")',
        'props[PROPERTY_TIMER_ROLL_TIMES] = str(n + 1)',
        '{**p, "TIMER_ENQUEUE_MS": str(now)}',
        'p.setdefault("TIMER_DEQUEUE_MS", t)',
    ):
        assert WRITES.search(code), code
    for code in (
        "props.get(PROPERTY_TRANSACTION_CHECK_TIMES)",
        'p[PROPERTY_TRANSACTION_CHECK_TIMES] == "1"',
        'f"put back with TRANSACTION_CHECK_TIMES={n}"',
        'props.get(PROPERTY_TIMER_ROLL_TIMES, "0")',
    ):
        assert not WRITES.search(code), code
