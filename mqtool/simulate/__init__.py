"""Offline replay of a broker's time-driven services (schedule, timer, transaction check) on a virtual clock."""

from mqtool.simulate.runner import SimulationResult, simulate

__all__ = ["SimulationResult", "simulate"]
