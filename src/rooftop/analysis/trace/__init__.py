"""Profiler traces: the event table (events), per-format loaders (xplane, chrome_json), the loader
dispatch (load) and op grouping and steps on a loaded trace (ops)."""
