"""Profiles and HLO on the roofline: ``trace/`` loads profiler traces into one event table, ``hlo/`` counts
and times XLA HLO modules, ``torch/`` prices PyTorch (Kineto) traces, ``compare`` judges measured ops
against their predicted times and ``profile`` runs the whole loop on one trace."""
