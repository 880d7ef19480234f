"""The `spark-audit` options checked together, before a store is opened or Spark starts.

Names are the command-line spellings, so the messages name what the user typed. Imports nothing heavy.
"""

from __future__ import annotations

from collections.abc import Iterable

from mqtool.errors import MqtoolError


class AuditOptionError(MqtoolError, ValueError):
    """spark-audit options that do not fit together, or a malformed --conf."""


def check_audit_options(local: bool, master: str | None, conf: Iterable[str]) -> dict[str, str]:
    """The extra Spark settings (`--conf KEY=VALUE`, split at the first '='), once the options fit:
    --local runs without Spark, so it takes no --master."""
    if local and master:
        raise AuditOptionError("use either --local or --master, not both")
    conf = list(conf)
    bad = [c for c in conf if "=" not in c]
    if bad:
        raise AuditOptionError(f"--conf takes KEY=VALUE, not {bad[0]!r}")
    return dict(c.split("=", 1) for c in conf)
