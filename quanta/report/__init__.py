"""Metrics, comparison tables and plots."""
