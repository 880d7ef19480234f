"""read_config_json: the main file, else `.bak` as `ConfigManager.load` does, with readable problems;
never writes."""

import os
from pathlib import Path

import pytest

from mqtool.formats.offsets_json import DelayOffsets, parse_consumer_offsets, parse_delay_offsets
from mqtool.store.config_files import read_config_json

SHARED = Path(__file__).resolve().parents[2].parent / "shared"
GOOD = '{\n\t"offsetTable":{1:3,2:2\n\t}\n}'
OLDER = '{\n\t"offsetTable":{1:1\n\t}\n}'
TORN = '{\n\t"offsetTable":{1:3,2:2\n\t}\n}\x00\x00'  # a crash left zero bytes
GARBAGE = '{\n\t"offsetTable":{\n\t\t1:x\n}'


def write(directory: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")
    return directory / "delayOffset.json"


def snapshot(directory: Path) -> dict[str, tuple[bytes, int]]:
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in directory.iterdir() if p.is_file()}


def test_main_file_is_used(tmp_path: Path) -> None:
    path = write(tmp_path, {"delayOffset.json": GOOD, "delayOffset.json.bak": OLDER})
    value, used, problems = read_config_json(path, parse_delay_offsets)
    assert value == DelayOffsets({1: 3, 2: 2}) and used == path and problems == []


def test_unparsable_main_falls_back_with_line_and_column(tmp_path: Path) -> None:
    path = write(tmp_path, {"delayOffset.json": GARBAGE, "delayOffset.json.bak": OLDER})
    value, used, problems = read_config_json(path, parse_delay_offsets)
    assert value == DelayOffsets({1: 1}) and used == tmp_path / "delayOffset.json.bak"
    assert problems == [
        "delayOffset.json: unparsable at line 3 col 5 (expected a value but found 'x'); read delayOffset.json.bak"
    ]


@pytest.mark.parametrize(
    ("main", "problem"),
    [
        (None, "delayOffset.json: missing"),
        ("", "delayOffset.json: empty"),
        (" \n", "delayOffset.json: empty"),
    ],
)
def test_missing_or_empty_main_falls_back(tmp_path: Path, main: str | None, problem: str) -> None:
    files = {"delayOffset.json.bak": OLDER} | ({} if main is None else {"delayOffset.json": main})
    value, used, problems = read_config_json(write(tmp_path, files), parse_delay_offsets)
    assert value == DelayOffsets({1: 1}) and used.name == "delayOffset.json.bak"
    assert problems == [f"{problem}; read delayOffset.json.bak"]


def test_torn_main_is_unparsable(tmp_path: Path) -> None:
    path = write(tmp_path, {"delayOffset.json": TORN, "delayOffset.json.bak": OLDER})
    _, used, problems = read_config_json(path, parse_delay_offsets)
    assert used.name == "delayOffset.json.bak"
    assert problems[0].startswith("delayOffset.json: unparsable at line 4 col 2 (")


def test_both_absent_is_normal(tmp_path: Path) -> None:
    assert read_config_json(tmp_path / "consumerOffset.json", parse_consumer_offsets) == (None, None, [])


def test_no_usable_file(tmp_path: Path) -> None:
    path = write(tmp_path, {"delayOffset.json": GARBAGE})
    value, used, problems = read_config_json(path, parse_delay_offsets)
    assert (value, used) == (None, None)
    assert problems == [
        "delayOffset.json: unparsable at line 3 col 5 (expected a value but found 'x'); "
        "delayOffset.json.bak: missing; the broker would start from defaults"
    ]
    write(tmp_path, {"delayOffset.json.bak": "nonsense"})
    _, _, problems = read_config_json(path, parse_delay_offsets)
    assert "delayOffset.json.bak: unparsable at line 1 col 1" in problems[0]
    assert problems[0].endswith("the broker would fail to load it")


def test_unreadable_main(tmp_path: Path) -> None:
    (tmp_path / "delayOffset.json").mkdir()  # a directory cannot be read as a file
    write(tmp_path, {"delayOffset.json.bak": OLDER})
    value, used, problems = read_config_json(tmp_path / "delayOffset.json", parse_delay_offsets)
    assert value == DelayOffsets({1: 1}) and used.name == "delayOffset.json.bak"
    assert problems[0].startswith("delayOffset.json: unreadable (")


def test_never_writes(tmp_path: Path) -> None:
    path = write(tmp_path, {"delayOffset.json": GARBAGE, "delayOffset.json.bak": OLDER})
    before = snapshot(tmp_path)
    os.chmod(tmp_path, 0o555)  # a write would fail (unless running as root) ...
    try:
        read_config_json(path, parse_delay_offsets)
    finally:
        os.chmod(tmp_path, 0o755)
    assert snapshot(tmp_path) == before  # ... and nothing changed or appeared


@pytest.mark.oracle
def test_real_config_dirs() -> None:
    config = SHARED / "oracle/pair_default/B/config"
    if not config.is_dir():
        pytest.skip(f"{config} is absent: real config files not checked")
    value, used, problems = read_config_json(config / "consumerOffset.json", parse_consumer_offsets)
    assert used == config / "consumerOffset.json" and problems == []
    assert value.offset("RMQ_SYS_TRANS_HALF_TOPIC", "CID_RMQ_SYS_TRANS", 0) == 14
    value, used, problems = read_config_json(config / "delayOffset.json", parse_delay_offsets)
    assert value.offset(1) == 2 and value.offset(4) == 0 and problems == []
