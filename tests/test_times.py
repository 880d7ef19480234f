"""Times as operators write them, and as mqtool prints them."""

import pytest

from mqtool.times import TimeFormatError, format_duration, format_time, parse_duration_ms, parse_time

NOW = 1795376100521  # pair_default's T_restartMs


def test_parse_absolute_forms():
    assert parse_time("1795376100521") == NOW
    assert parse_time("2026-11-22T10:00:00Z") == 1795341600000
    assert parse_time("2026-11-22T10:00:00.250+00:00") == 1795341600250
    assert parse_time("2026-11-22T11:00:00+01:00") == 1795341600000
    assert parse_time("2026-11-22T10:00:00") == 1795341600000  # no zone: UTC


def test_parse_relative_needs_now():
    assert parse_time("+90s", NOW) == NOW + 90_000
    assert parse_time("-2h", NOW) == NOW - 7_200_000
    assert parse_time("+3d", NOW) == NOW + 259_200_000
    assert parse_time("+1500ms", NOW) == NOW + 1500
    with pytest.raises(TimeFormatError, match="needs a reference time"):
        parse_time("+30m")
    with pytest.raises(TimeFormatError, match="not a time: 'yesterday'"):
        parse_time("yesterday", NOW)


def test_durations():
    assert parse_duration_ms("90s") == 90_000
    assert parse_duration_ms("2h") == 7_200_000
    with pytest.raises(TimeFormatError):
        parse_duration_ms("soon")


def test_format():
    assert format_time(1795341600000) == "2026-11-22T10:00:00.000Z"
    assert format_time(1795341600007) == "2026-11-22T10:00:00.007Z"
    assert format_time(None) == "-"
    assert format_duration(7_080_000) == "1h58m"
    assert format_duration(-45_000) == "-45s"
    assert format_duration(120) == "120ms"
    assert format_duration(3 * 86_400_000 + 2 * 3_600_000) == "3d2h"


def test_local_reads_an_iso_time_without_offset_as_local(monkeypatch):
    import time

    monkeypatch.setenv("TZ", "Asia/Tokyo")  # UTC+9, no daylight saving
    time.tzset()
    try:
        assert parse_time("2026-11-22T19:00:00", local=True) == 1795341600000
        assert parse_time("2026-11-22T10:00:00Z", local=True) == 1795341600000  # an explicit offset wins
        assert parse_time("+1h", NOW, local=True) == NOW + 3_600_000
        assert parse_time("2026-11-22T10:00:00") == 1795341600000  # without local: UTC
    finally:
        monkeypatch.undo()
        time.tzset()
