"""sysFlag bits of a CommitLog record (spec §2.3; `MessageSysFlag`, `CompressionType`)."""

from dataclasses import dataclass

COMPRESSED = 0x1
MULTI_TAGS = 0x2
TRANSACTION_MASK = 0xC
TRANSACTION_NOT_TYPE = 0x0
TRANSACTION_PREPARED = 0x4
TRANSACTION_COMMIT = 0x8
TRANSACTION_ROLLBACK = 0xC
BORNHOST_V6 = 0x10
STOREHOST_V6 = 0x20
NEED_UNWRAP = 0x40
INNER_BATCH = 0x80
COMPRESSION_MASK = 0x700

TRANSACTION_NAMES = {0x0: "none", 0x4: "prepared", 0x8: "commit", 0xC: "rollback"}
# CompressionType.findByValue: 0 is ZLIB too (old clients wrote no type bits).
COMPRESSION_NAMES = {0: "zlib", 1: "lz4", 2: "zstd", 3: "zlib"}


@dataclass(frozen=True)
class SysFlag:
    """A sysFlag decoded into its named parts."""

    value: int

    @property
    def compressed(self) -> bool:
        return bool(self.value & COMPRESSED)

    @property
    def multi_tags(self) -> bool:
        return bool(self.value & MULTI_TAGS)

    @property
    def transaction(self) -> str:
        return TRANSACTION_NAMES[self.value & TRANSACTION_MASK]

    @property
    def bornhost_v6(self) -> bool:
        return bool(self.value & BORNHOST_V6)

    @property
    def storehost_v6(self) -> bool:
        return bool(self.value & STOREHOST_V6)

    @property
    def need_unwrap(self) -> bool:
        return bool(self.value & NEED_UNWRAP)

    @property
    def inner_batch(self) -> bool:
        return bool(self.value & INNER_BATCH)

    @property
    def compression_type(self) -> int:
        return (self.value & COMPRESSION_MASK) >> 8

    @property
    def compression(self) -> str | None:
        """The body's codec when COMPRESSED is set, else None; an unknown type is `unknown(N)`."""
        if not self.compressed:
            return None
        return COMPRESSION_NAMES.get(self.compression_type, f"unknown({self.compression_type})")

    def as_dict(self) -> dict:
        return {
            "value": self.value, "compressed": self.compressed, "multi_tags": self.multi_tags,
            "transaction": self.transaction, "bornhost_v6": self.bornhost_v6,
            "storehost_v6": self.storehost_v6, "need_unwrap": self.need_unwrap,
            "inner_batch": self.inner_batch, "compression": self.compression,
        }
