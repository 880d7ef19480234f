"""Only `mqtool/rules` (and `mqtool/formats`, which spells the name) writes TRANSACTION_CHECK_TIMES (issue 27).

A module that wrote the property itself would be a second copy of `needDiscard`'s transition; they
read it through `rules.transaction.check_times_of` or the name, and write it through `put_check_times`.
"""

import re
from pathlib import Path

import mqtool

ROOT = Path(mqtool.__file__).parent
# a subscript assignment, a dict display entry or a setdefault, with the name or its text
WRITES = re.compile(
    r"(PROPERTY_TRANSACTION_CHECK_TIMES|[\"']TRANSACTION_CHECK_TIMES[\"'])\s*(\]\s*=[^=]|:)"
    r"|setdefault\(\s*(PROPERTY_TRANSACTION_CHECK_TIMES|[\"']TRANSACTION_CHECK_TIMES[\"'])"
)


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


def test_no_module_outside_rules_writes_transaction_check_times():
    assert _writers() == []


def test_the_pattern_finds_each_way_of_writing_it():
    for code in (
        'props[PROPERTY_TRANSACTION_CHECK_TIMES] = "1"',
        "{**p, PROPERTY_TRANSACTION_CHECK_TIMES: t}",
        'p["TRANSACTION_CHECK_TIMES"] = t',
        'p.setdefault(PROPERTY_TRANSACTION_CHECK_TIMES, "1")',
    ):
        assert WRITES.search(code), code
    for code in (
        "props.get(PROPERTY_TRANSACTION_CHECK_TIMES)",
        'p[PROPERTY_TRANSACTION_CHECK_TIMES] == "1"',
        'f"put back with TRANSACTION_CHECK_TIMES={n}"',
    ):
        assert not WRITES.search(code), code
