"""Findings: problems in the data, reported with file, byte offset and reason (never raised).

Readers and checks do not keep findings on themselves: the caller passes one `Findings`
accumulator in and every reader or check adds to it (as Kafka's DumpLogSegments passes its
error map), so nothing is reset or sliced after the fact.
"""

from collections import Counter
from dataclasses import asdict, dataclass

SEVERITIES = ("error", "warning", "info")


@dataclass(frozen=True, order=True)
class Finding:
    """One problem; the same schema serves the store model, inspect and every audit."""

    file: str
    offset: int | None
    check: str
    severity: str
    message: str
    topic: str | None = None
    queue_id: int | None = None

    def as_dict(self) -> dict:
        d = asdict(self)
        return {k: d[k] for k in ("check", "severity", "file", "offset", "topic", "queue_id", "message")}


class Findings(list[Finding]):
    """The accumulator handed to readers and checks; a plain list of `Finding` with `add`."""

    def add(self, file: str, offset: int | None, check: str, severity: str, message: str,
            topic: str | None = None, queue_id: int | None = None) -> None:
        self.append(Finding(file, offset, check, severity, message, topic, queue_id))

    def worst(self) -> str | None:
        """The most severe level present (error > warning > info), None when empty."""
        present = {f.severity for f in self}
        return next((s for s in SEVERITIES if s in present), None)


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Stable report order: file, offset, check (None offsets first)."""
    return sorted(findings, key=lambda f: (f.file, -1 if f.offset is None else f.offset, f.check, f.message))


def findings_section(findings: list[Finding]) -> dict:
    """A view's `findings` (in report order) and `finding_counts` (per severity) keys, for its document."""
    found = sort_findings(list(findings))
    counts = Counter(f.severity for f in found)
    return {"findings": [f.as_dict() for f in found], "finding_counts": {s: counts[s] for s in SEVERITIES}}
