"""Without the compiled extension (a machine without a C compiler at install): the scan runs its
plain-Python walk, gives the same answers, and says so once per process.

The extension is made unimportable the way Python's import system offers (`sys.modules[name] = None`)
in a fresh interpreter; nothing private is patched.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "fixtures" / "demo"
NOW = "1790000020000"
WARNING = "mqtool's compiled extension cannot be loaded"


def _run(code: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=REPO, timeout=600
    )


def _cli(without_extension: bool, *args: str) -> subprocess.CompletedProcess:
    hide = "sys.modules['mqtool._native'] = None; " if without_extension else ""
    return _run(
        f"import sys; {hide}from mqtool.cli.app import main; sys.argv = ['mqtool', *sys.argv[1:]]; main()", *args
    )


def test_without_the_extension_the_overview_is_the_same_and_warns_once():
    args = ("inspect", str(DEMO), "--json", "--now", NOW)
    compiled, plain = _cli(False, *args), _cli(True, *args)
    assert (compiled.returncode, plain.returncode) == (0, 0), plain.stderr[-2000:]
    assert json.loads(plain.stdout)["view"] == "overview"
    assert plain.stdout == compiled.stdout
    assert WARNING not in compiled.stderr
    assert plain.stderr.count(WARNING) == 1 and "RuntimeWarning" in plain.stderr


def test_the_warning_is_given_once_however_many_scans():
    """Two stores scanned twice each in one process, every warning recorded ("always": the warnings
    registry does not hide repeats): one warning, and the plain walk's columns."""
    code = f"""
import sys, warnings
sys.modules["mqtool._native"] = None
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    from mqtool.store.commitlog import CommitLog
    from mqtool.store import fastscan
    counts = []
    for root in [{str(DEMO)!r}, {str(DEMO)!r}]:
        log = CommitLog.open(__import__("pathlib").Path(root))
        counts.append(sum(len(c) for _, c in log.scan_columns()))
print(counts, [str(w.message)[:44] for w in caught], fastscan.compiled_kernels().native)
"""
    p = _run(code)
    assert p.returncode == 0, p.stderr[-2000:]
    assert p.stdout.strip() == f"[66, 66] [{WARNING!r}] False"
