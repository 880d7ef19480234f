"""`store/extension.py`: the one loader of `mqtool._native` (the warning itself is tested in child processes,
where the extension is really missing or stale: tests/store/test_native.py, tests/inspect/test_jsonlines.py)."""

import pytest

from mqtool import _native
from mqtool.store import extension


def test_every_kernel_listed_is_in_the_built_extension():
    """FALLBACKS names what the modules take; a name the build lacks would make a fresh install warn."""
    assert [name for name in extension.FALLBACKS if not hasattr(_native, name)] == []
    assert extension.kernel("json_lines") is _native.json_lines
    assert extension.kernel("JSONL_TEXTS") is _native.JSONL_TEXTS


def test_a_name_not_listed_is_refused():
    with pytest.raises(KeyError, match="crc32_tables"):
        extension.kernel("crc32_tables")


def test_plain_python_hides_every_kernel_until_the_outermost_block_ends():
    with extension.plain_python():
        with extension.plain_python():
            assert extension.kernel("body_crcs") is None
        assert extension.kernel("string_hashes") is None
    assert extension.kernel("body_crcs") is _native.body_crcs
