"""Findings: problems in the data, reported with file, byte offset and reason (never raised)."""

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


def sort_findings(findings: list[Finding]) -> list[Finding]:
    """Stable report order: file, offset, check (None offsets first)."""
    return sorted(findings, key=lambda f: (f.file, -1 if f.offset is None else f.offset, f.check, f.message))
