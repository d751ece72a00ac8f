"""Developer tools for kvpool (not shipped in the wheel)."""
