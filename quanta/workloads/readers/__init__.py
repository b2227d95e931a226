"""Trace readers, one module per format. Each module has FORMAT, DESCRIPTION, `sniff(sample)` (does
the start of a file look like this format?) and `read(path, *, max_jobs=None) -> Trace`.
Use `quanta.workloads.formats.load_trace` to pick one by name or by detection."""
