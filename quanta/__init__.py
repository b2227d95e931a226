"""Quanta: one decision core for deep-learning training cluster schedulers."""

__version__ = "0.1.0"
