"""Fuzz harness: hostile inputs for the CLI, the HLO parser and analysis, the trace loaders, chip files
and Hugging Face config.json. ``oracle`` runs one case and says how it ended, ``cases`` builds cases
from a seeded random generator, ``known`` lists the causes still open; ``test_fuzz_slice`` is the
time-boxed CI slice and ``benchmarks/fuzz.py`` the long run."""
