"""The simulator never reads the wall clock and never uses unseeded randomness."""

import re
from pathlib import Path

import mqtool.simulate

FORBIDDEN = re.compile(r"time\.time\(|time\.monotonic\(|datetime\.now\(|datetime\.utcnow\(|random\.random\(|"
                       r"random\.randint\(|random\.choice\(|^\s*import time\b|^\s*from time import", re.M)


def test_no_wall_clock_or_unseeded_random():
    root = Path(mqtool.simulate.__file__).parent
    offenders = [f"{p.name}: {m.group(0)}" for p in sorted(root.glob("*.py"))
                 for m in FORBIDDEN.finditer(p.read_text())]
    assert offenders == []
