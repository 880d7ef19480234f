"""The rules package is pure and is the only home of its rules."""

import ast
from pathlib import Path

import mqtool.rules

PKG = Path(mqtool.rules.__file__).parent.parent
RULES = Path(mqtool.rules.__file__).parent
ALLOWED_IMPORTS = ("mqtool.rules", "mqtool.formats")


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text("utf-8"), str(path))


def test_rules_import_only_formats_and_themselves_and_read_no_files():
    for path in RULES.glob("*.py"):
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("mqtool"):
                assert node.module.startswith(ALLOWED_IMPORTS), f"{path.name} imports {node.module}"
            if isinstance(node, ast.Import):
                assert all(not a.name.startswith("mqtool") for a in node.names), path.name
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                assert node.func.id != "open", f"{path.name} opens a file"


def test_no_rule_is_defined_twice():
    rule_names = {node.name for path in RULES.glob("*.py") for node in _tree(path).body
                  if isinstance(node, ast.FunctionDef) and not node.name.startswith("_")}
    assert {"correct_delay_offset", "compute_deliver_timestamp", "correct_deliver_timestamp", "walk_chain",
            "do_enqueue", "need_discard", "need_skip", "is_need_check", "check_visit", "predict_rounds"} <= rule_names
    elsewhere = []
    for path in PKG.rglob("*.py"):
        if path.parent == RULES:
            continue
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.lstrip("_") in rule_names:
                elsewhere.append(f"{path.relative_to(PKG)}:{node.lineno} {node.name}")
    assert elsewhere == []
