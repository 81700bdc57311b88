"""XLA HLO: shapes, device groups, the data model (ir), the text parser, the logical mesh, per-instruction
counts and the roofline analysis of a module (analyze)."""
