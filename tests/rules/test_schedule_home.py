"""The delay-level transform has one home: `mqtool.rules.schedule` (issue #27).

Outside `rules/`, no module turns a level into a queue id (`level - 1`) or back (`queue_id + 1`), or clamps
a level with `min(...)` itself: it calls `delay_level_2_queue_id`, `queue_id_2_delay_level`,
`transform_delay_level`, `level_delay_ms` / `is_level_started`. The copies this replaced had drifted
(a store helper clamped a missing level 18 to the last configured one, so trace said "level 18 (10s)").
"""

import ast
from pathlib import Path

import mqtool

PKG = Path(mqtool.__file__).parent


def _copies(source: str, where: str) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(source)):
        if (
            isinstance(node, ast.BinOp)
            and isinstance(node.op, ast.Add | ast.Sub)
            and isinstance(node.right, ast.Constant)
            and node.right.value == 1
            and isinstance(node.left, ast.Name | ast.Attribute)  # a level or a queue id, not a count like max(qids)
        ):
            left = ast.unparse(node.left).lower()
            if "level" in left or (isinstance(node.op, ast.Add) and ("qid" in left or "queue_id" in left)):
                out.append(f"{where}:{node.lineno} {ast.unparse(node)}")
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in ("min", "max")
            and any(isinstance(a, ast.Name | ast.Attribute) and "level" in ast.unparse(a).lower() for a in node.args)
        ):
            out.append(f"{where}:{node.lineno} {ast.unparse(node)}")
    return out


def test_no_delay_level_arithmetic_outside_rules():
    found = [
        c
        for p in sorted(PKG.rglob("*.py"))
        if p.parent.name != "rules"
        for c in _copies(p.read_text("utf-8"), str(p.relative_to(PKG)))
    ]
    assert found == []


def test_the_guard_sees_each_kind_of_copy():
    src = "def f(level, qid, rec, levels):\n    return level - 1, qid + 1, rec.queue_id + 1, min(level, len(levels))\n"
    assert _copies(src, "x.py") == [
        "x.py:2 level - 1",
        "x.py:2 qid + 1",
        "x.py:2 rec.queue_id + 1",
        "x.py:2 min(level, len(levels))",
    ]
    assert _copies("n = offset + 1\nm = count - 1\nq = max(qids) + 1\n", "y.py") == []
