"""What a run prints: coverage and clause tables, page maps, hints, the unexercised clauses."""
