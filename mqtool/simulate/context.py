"""What every simulated service shares: the engine, the store model, the event log, settings and clocks."""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from mqtool.formats.broker_conf import BrokerConfig
from mqtool.simulate.engine import Engine
from mqtool.simulate.events import EventLog
from mqtool.simulate.model import StoreModel
from mqtool.simulate.scenario import Scenario
from mqtool.simulate.service import Service


@dataclass
class SimContext:
    """`clock()` is the broker's `System.currentTimeMillis()`: virtual time plus any clock jumps."""

    engine: Engine
    model: StoreModel
    log: EventLog
    config: BrokerConfig
    scenario: Scenario
    rng: random.Random
    version: str = "5.3"
    clock_offset: int = 0
    running: bool = True
    services: list[Service] = field(default_factory=list)  # in the broker's start order

    @property
    def v4(self) -> bool:
        return self.version.startswith("4")

    def clock(self) -> int:
        return self.engine.now + self.clock_offset

    def put(self, msg, service: str):
        """Append `msg` at the broker's clock; the result says whether a fault refused it."""
        return self.model.append(msg, self.clock(), service)
