"""Workloads: reading traces of every supported format, and the bundled sample traces."""
