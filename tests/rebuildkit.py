"""Rebuilding an oracle store with the builder and comparing it file by file with the real one."""

from pathlib import Path

from mqtool.formats.broker_conf import BrokerConfig
from mqtool.formats.checkpoint import checkpoint


def files(root: Path) -> dict[str, bytes]:
    """Every file under `root` by relative path."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def config(**java: object) -> BrokerConfig:
    """5.3.1 defaults with the oracle README's settings (by Java name)."""
    return BrokerConfig().with_overrides(java)


def copy_checkpoint(w, src: Path) -> None:
    """The StoreCheckpoint values the real store shut down with (its flush times come from the wall clock)."""
    cp = checkpoint.parse((src / "checkpoint").read_bytes())
    w.write_checkpoint(cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp,
                       cp.master_flushed_offset, cp.confirm_phy_offset)


def only_in_index_name(real: dict[str, bytes], built: dict[str, bytes]) -> None:
    """The one IndexFile of each side holds the same bytes; its name is the wall-clock time of its creation
    (`UtilAll.timeMillisToHumanString`), which the builder takes from the first record's store time instead."""
    ri = [k for k in real if k.startswith("index/")]
    bi = [k for k in built if k.startswith("index/")]
    assert len(ri) == len(bi) == 1
    assert real[ri[0]] == built[bi[0]]
    assert ri[0] != bi[0]  # the name: the real file was created a few ms after the first record was stored
    for k in ri:
        del real[k]
    for k in bi:
        del built[k]


def compared_files(src: Path, out: Path) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """(real, built) files of the oracle store `src` and its rebuild `out`, with the IndexFile checked
    apart (`only_in_index_name`) and the real store's lifecycle markers left out."""
    real, built = files(src), files(out)
    only_in_index_name(real, built)
    for k in LIFECYCLE:
        del real[k]
    return real, built


def assert_same_files(real: dict[str, bytes], built: dict[str, bytes], count: int) -> None:
    """The same `count` files on both sides, byte for byte."""
    assert sorted(built) == sorted(real)
    assert [k for k in real if real[k] != built[k]] == []
    assert len(real) == count


# DefaultMessageStore's lock file (holds "lock") and the empty abort.bak of a clean shutdown: not layouts
LIFECYCLE = ("lock", "abort.bak")
