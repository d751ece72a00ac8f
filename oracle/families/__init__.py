"""The allocator families, as data for the engine: one subpackage each (call table, scheduler
model, executor, coverage events and clause map, targets, capability declaration)."""
