"""`RecordSpool` (the timer topic's re-puts waiting for their slot on disk) reads back, field for
field, the last record put at a place, from its write buffer or from the file."""

from hypothesis import given, settings
from hypothesis import strategies as st

from mqtool.simulate import spool as spool_mod
from mqtool.simulate.model import SimMessage


@settings(max_examples=30, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["put", "get", "drop"]), st.integers(0, 40), st.text(max_size=30),
                          st.binary(max_size=300)), max_size=60),
       st.sampled_from([1, 64, 1 << 20]))
def test_spool_reads_back_what_was_put_last(ops, flush):
    """Records put, put again at the same place, dropped, read back from the buffer and from the file
    (`FLUSH` small: most reads come from the file) equal the last record put there, or None."""
    old, spool_mod.FLUSH = spool_mod.FLUSH, flush
    sp = spool_mod.RecordSpool()
    try:
        live: dict[int, SimMessage] = {}
        for op, phys, text, body in ops:
            if op == "put":
                m = SimMessage("T", phys % 3, {"K": text, "UNIQ_KEY": f"U{phys}"}, body=body, born_ts=phys)
                m.phys, m.tags_code = phys, len(text)
                sp.put(m)
                live[phys] = m
            elif op == "drop":
                sp.drop(phys)
                live.pop(phys, None)
            back = sp.get(phys)
            want = live.get(phys)
            assert (back is None) == (want is None) == (phys not in sp) and len(sp) == len(live)
            if want is not None:
                assert back is not want
                fields = SimMessage.__slots__
                assert [getattr(back, f) for f in fields] == [getattr(want, f) for f in fields]
    finally:
        spool_mod.FLUSH = old
        sp.close()
