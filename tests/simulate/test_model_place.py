"""The one place and size of an appended record (`StoreModel.place`, `reput_size`, `plain_reput_size`), with
offsets and sizes worked out by hand from the rules: a normal CommitLog ends a file with a BLANK filler
when the record and the 8-byte filler do not fit (`CommitLog.asyncPutMessage`); on DLedger the record is
an entry's body, 48 bytes after the entry's start, and an entry that leaves less than 8 bytes goes to the
next file (`MmapFileList.preAppend`)."""

from mqtool.formats.sysflag import BORNHOST_V6
from mqtool.simulate.model import EmptyBase, StoreModel


def _model(dledger: bool = False, end: int = 900, trailing: bool = True) -> StoreModel:
    return StoreModel(EmptyBase(1000, end, dledger), trailing_separator=trailing)


def test_place_fills_the_file_end_with_a_blank():
    m = _model()
    assert m.place(50) == 900  # 900 + 50 + 8 = 958 <= 1000
    assert m.place(42) == 950  # 950 + 42 + 8 = 1000: still fits
    assert m.place(10) == 1000  # 992 + 10 + 8 > 1000: an 8-byte filler at 992
    assert m.place(1) == 1010 and m.end == 1011


def test_place_on_dledger_puts_the_record_after_the_entry_header():
    m = _model(dledger=True)
    assert m.place(30) == 948  # the entry at 900, its body 48 bytes in; 900 + 48 + 30 + 8 = 986 <= 1000
    assert m.place(30) == 1048  # 978 + 48 + 30 + 8 > 1000: the next file's first entry
    assert m.end == 1078


def test_reput_size_from_the_map():
    m = _model()
    props = {"A": "x", "BB": "yz"}  # "A\x01x\x02BB\x01yz\x02": 10 bytes
    assert m.reput_size(props, 100, 0, 5) == 10 + 100 + 5 + 16  # two IPv4 hosts: 8 bytes each
    assert m.reput_size(props, 100, BORNHOST_V6, 5) == 10 + 100 + 5 + 20 + 8
    assert m.reput_size({"K": "ключ"}, 100, 0, 0) == 1 + 8 + 2 + 100 + 16  # UTF-8 bytes, not characters
    v4 = _model(trailing=False)  # 4.9.8: no last separator
    assert v4.reput_size(props, 100, 0, 5) == 130 and v4.reput_size({}, 100, 0, 5) == 121
    assert m.plain_reput_size(50, 100) == 150 and v4.plain_reput_size(50, 100) == 149
