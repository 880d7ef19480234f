"""The body of a transaction op message (spec §7.4; `TransactionalMessageServiceImpl`, `TransactionalOpBatchService`).

Tag `d` (REMOVE_TAG); the body lists half-queue offsets: 5.x batches write each followed by ','
(`"0,1,3,"`), 4.x writes one offset per op message with no separator (`"7"`).
"""

from collections.abc import Sequence


def parse_op_body(body: bytes) -> list[int]:
    """Half queue offsets in an op body, either dialect; non-numeric parts are ignored (as the broker does)."""
    out = []
    for part in body.decode("utf-8", "replace").split(","):
        part = part.strip()
        if part.lstrip("-").isdigit():
            out.append(int(part))
    return out


def build_op_body(half_queue_offsets: Sequence[int], v5: bool = True) -> bytes:
    """5.x: every offset followed by ','; 4.x: exactly one offset, no separator."""
    if v5:
        return "".join(f"{o}," for o in half_queue_offsets).encode()
    if len(half_queue_offsets) != 1:
        raise ValueError("a 4.x op message carries exactly one half offset")
    return str(half_queue_offsets[0]).encode()
