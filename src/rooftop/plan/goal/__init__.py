"""Plans from a goal: the smallest slice (training) or the fewest chips (serving) that meet it."""
