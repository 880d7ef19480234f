"""The broker settings the audits use, as plain values (picklable, so tasks can carry them).

Taken from a `BrokerConfig` (`mqtool.formats.broker_conf`) when one is given; any attribute it lacks
falls back to RocketMQ 5.3.1's default (spec §9).
"""

import re
from dataclasses import dataclass

DEFAULT_DELAY_LEVELS = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"
_UNITS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}


def parse_delay_levels(text: str) -> tuple[int, ...]:
    """`messageDelayLevel` → milliseconds per level (level 1 first), as `parseDelayLevel` reads it."""
    out = []
    for item in text.split():
        m = re.fullmatch(r"(\d+)([smhd])", item)
        if not m:
            raise ValueError(f"messageDelayLevel: cannot read {item!r}")
        out.append(int(m.group(1)) * _UNITS[m.group(2)])
    return tuple(out)


@dataclass(frozen=True)
class AuditSettings:
    delay_levels_ms: tuple[int, ...] = parse_delay_levels(DEFAULT_DELAY_LEVELS)
    timer_precision_ms: int = 1000
    transaction_timeout_ms: int = 6000
    transaction_check_max: int = 15
    transaction_check_interval_ms: int = 30000
    file_reserved_time_h: int = 72
    max_message_size: int = 4 * 1024 * 1024

    @classmethod
    def from_config(cls, config) -> "AuditSettings":
        """Read what the audits need from a BrokerConfig-like object (None: the defaults)."""
        if config is None:
            return cls()
        d = cls()

        def get(*names, default):
            for n in names:
                v = getattr(config, n, None)
                if v is not None and not callable(v):
                    return int(v)
            return default

        levels = d.delay_levels_ms
        fn = getattr(config, "delay_levels_ms", None)
        if callable(fn):
            levels = tuple(int(x) for x in fn())
        elif isinstance(getattr(config, "message_delay_level", None), str):
            levels = parse_delay_levels(config.message_delay_level)
        return cls(
            delay_levels_ms=levels,
            timer_precision_ms=get("timer_precision_ms", default=d.timer_precision_ms),
            transaction_timeout_ms=get("transaction_timeout", "transaction_time_out",
                                       default=d.transaction_timeout_ms),
            transaction_check_max=get("transaction_check_max", default=d.transaction_check_max),
            transaction_check_interval_ms=get("transaction_check_interval",
                                              default=d.transaction_check_interval_ms),
            file_reserved_time_h=get("file_reserved_time", default=d.file_reserved_time_h),
            max_message_size=get("max_message_size", default=d.max_message_size),
        )

    def delay_ms(self, level: int) -> int:
        """Delay of a level, clamped into 1..max like `ScheduleMessageService`."""
        return self.delay_levels_ms[min(max(level, 1), len(self.delay_levels_ms)) - 1]
