"""The documentation site's generators (the MkDocs hook ``docs/hooks/kvpool_docs.py`` calls them).

``spec_md`` reads SPEC.md into sections and clauses, ``spec_pages`` renders one page per
section, ``reference_pages`` the generated reference pages (divergence registry, benchmark
results). Nothing here is shipped in the wheel.
"""
