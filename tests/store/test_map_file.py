"""A mapping outlived by a view of it must not fail the scan (the map goes with the last view)."""

import numpy as np

from mqtool.store.mapped_files import map_file


def test_view_outliving_the_mapping(tmp_path):
    p = tmp_path / "f"
    p.write_bytes(bytes(range(16)) * 4)
    with map_file(p) as buf:
        view = np.frombuffer(buf, dtype=np.uint8, count=16)
    assert view[15] == 15  # still readable: the mapping was not closed under it
    with map_file(tmp_path / "f") as buf:
        assert buf[1] == 1
