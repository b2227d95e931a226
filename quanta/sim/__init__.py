"""The trace-driven simulator: a discrete-event driver of the decision loop."""

from quanta.sim.engine import SimResult, Simulator

__all__ = ["SimResult", "Simulator"]
