"""Turning (GPU type, count) targets into concrete GPUs on nodes."""

from quanta.placement.occupancy import Occupancy

__all__ = ["Occupancy"]
