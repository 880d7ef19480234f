"""DLedger CommitLog files (spec §12): entries, the file-end filler, index units, checkpoint, currterm.

Sources: openmessaging/dledger 0.3.1.2 (the `dleger.version` of RocketMQ 5.3.1) `DLedgerEntry`,
`DLedgerEntryCoder.encode/encodeIndex`, `MmapFileList.preAppend` (filler), `DLedgerMmapFileStore`
(checkpoint), `MemberState` (currterm), `IOUtils.properties2String`. An entry's body is one ordinary
CommitLog record (`formats.commitlog.commitlog_record`) whose PHYSICALOFFSET is `pos + BODY_OFFSET`.
Like the CommitLog record, checks (magic, size, pos) are not Construct `Check`s: a reader reports them.
"""

from construct import Bytes, Const, Int32sb, Int64sb, Padding, Peek, Rebuild, Struct, Switch, len_, this

from mqtool.formats.javahash import hashmap_order

# ===== DLedgerEntry / DLedgerMmapFileStore / MmapFileList constants =====
ENTRY_MAGIC = 1  # DLedgerMmapFileStore.MAGIC_1 == CURRENT_MAGIC
BLANK_MAGIC = -1  # MmapFileList.BLANK_MAGIC_CODE: the filler at a data file's end
MIN_BLANK_LEN = 8  # MmapFileList.MIN_BLANK_LEN: an entry must leave room for a filler
POS_OFFSET = 24  # DLedgerEntry.POS_OFFSET: where `pos` lies in the header
HEADER_SIZE = 44  # DLedgerEntry.HEADER_SIZE: magic .. bodyCrc (recovery wants size > this)
BODY_OFFSET = 48  # DLedgerEntry.BODY_OFFSET: HEADER_SIZE + the body length int
INDEX_UNIT_SIZE = 32  # DLedgerMmapFileStore.INDEX_UNIT_SIZE
DEFAULT_INDEX_FILE_SIZE = INDEX_UNIT_SIZE * 5 * 1024 * 1024  # DLedgerConfig.mappedFileSizeForEntryIndex

# ===== DLedgerEntryCoder.encode: the 48-byte header, then the body =====
entry_header = Struct(
    "magic" / Int32sb,
    "size" / Int32sb,  # BODY_OFFSET + body length (computeSizeInBytes)
    "index" / Int64sb,
    "term" / Int64sb,
    "pos" / Int64sb,  # the entry's own global offset in the data files
    "channel" / Int32sb,  # reserved, 0
    "chain_crc" / Int32sb,  # 0.3.1.2 writes 0
    "body_crc" / Int32sb,  # 0.3.1.2 writes 0
    "body_length" / Int32sb,
)

dledger_entry = Struct(
    "magic" / Int32sb,
    "size" / Rebuild(Int32sb, lambda ctx: BODY_OFFSET + len(ctx.body)),
    "index" / Int64sb,
    "term" / Int64sb,
    "pos" / Int64sb,
    "channel" / Int32sb,
    "chain_crc" / Int32sb,
    "body_crc" / Int32sb,
    "body_length" / Rebuild(Int32sb, len_(this.body)),
    "body" / Bytes(this.body_length),
)

# ===== MmapFileList.preAppend: -1 | bytes left in the file, then zeros to the file's end =====
blank_filler = Struct(
    "magic" / Const(BLANK_MAGIC, Int32sb),
    "size" / Int32sb,  # fileSize - wrotePosition: the filler's own length, header included
    Padding(this.size - 8),
)

# One item of a data file: an entry or the filler (anything else is a reader's finding).
data_item = Struct(
    "magic" / Peek(Int32sb),
    "item" / Switch(this.magic, {BLANK_MAGIC: blank_filler}, default=dledger_entry),
)

# ===== DLedgerEntryCoder.encodeIndex: unit `index` lies at index * INDEX_UNIT_SIZE =====
index_unit = Struct(
    "magic" / Int32sb,
    "pos" / Int64sb,
    "size" / Int32sb,
    "index" / Int64sb,
    "term" / Int64sb,
)


# ===== checkpoint / currterm: java.util.Properties text =====
CHECKPOINT_FILE = "checkpoint"  # DLedgerMmapFileStore.CHECK_POINT_FILE
END_INDEX_KEY = "endIndex"
COMMITTED_INDEX_KEY = "committedIndex"
TERM_FILE = "currterm"  # MemberState.TERM_PERSIST_FILE
TERM_KEY = "currTerm"
VOTE_LEADER_KEY = "voteLeader"


def parse_properties_text(text: str) -> dict[str, str]:
    """Lenient `Properties.load`: `key=value`, `key:value` or `key value`; `#`/`!` comments and blanks skipped.

    Line continuations and escapes (never written by DLedger) are not interpreted.
    """
    out: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = [i for i in (line.find("="), line.find(":"), line.find(" "), line.find("\t")) if i >= 0]
        if not cut:
            out[line] = ""
            continue
        i = min(cut)
        out[line[:i].strip()] = line[i + 1 :].strip().lstrip("=:").strip()
    return out


def build_properties_text(pairs: dict[str, object]) -> str:
    """`IOUtils.properties2String`: `key=value\\n` in the iteration order of a new `Properties`.

    Java 9+ Properties keep a ConcurrentHashMap of 16 buckets: its order equals a HashMap(16)'s here.
    """
    return "".join(f"{k}={v}\n" for k, v in hashmap_order([(k, str(v)) for k, v in pairs.items()], 16))


def _int_or_none(value: str | None) -> int | None:
    try:
        return int(value.strip()) if value is not None else None
    except ValueError:
        return None


def parse_checkpoint(text: str) -> dict:
    """`endIndex` / `committedIndex` as ints (None when absent or not a number)."""
    p = parse_properties_text(text)
    return {"end_index": _int_or_none(p.get(END_INDEX_KEY)),
            "committed_index": _int_or_none(p.get(COMMITTED_INDEX_KEY))}


def build_checkpoint(end_index: int, committed_index: int) -> str:
    """`DLedgerMmapFileStore.persistCheckPoint`'s text."""
    return build_properties_text({END_INDEX_KEY: end_index, COMMITTED_INDEX_KEY: committed_index})


def parse_currterm(text: str) -> dict:
    """`currTerm` as an int (None when absent or bad) and `voteLeader` ('' means none, as Java writes it)."""
    p = parse_properties_text(text)
    return {"curr_term": _int_or_none(p.get(TERM_KEY)), "vote_leader": p.get(VOTE_LEADER_KEY)}


def build_currterm(curr_term: int, vote_leader: str | None) -> str:
    """`MemberState.persistTerm`'s text (a missing vote is written as an empty value)."""
    return build_properties_text({TERM_KEY: curr_term, VOTE_LEADER_KEY: vote_leader or ""})
