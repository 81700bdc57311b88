"""Training planner: layouts, the step priced through the cost core, memory, the search."""
