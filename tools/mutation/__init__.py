"""A small AST mutation driver for kvpool (not shipped in the wheel); see ``__main__``."""
