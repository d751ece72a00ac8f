"""Long names in table cells may wrap at their dots and slashes.

A table fits its column only if every column is at least as wide as its longest unbreakable
word, and a cell can hold ``kvpool.integrations.sglang_replay_hybrid`` or
``sglang/srt/mem_cache/allocator/base.py``. ``break_long_words`` puts a ``<wbr>`` (a place the
line may break, no character) after each ``.`` and ``/`` inside such words of a page's
Markdown tables; shorter words and everything outside them are left alone. The text, its copy
and the search index are unchanged.
"""

from __future__ import annotations

import re

# Words shorter than this stay whole (``capacity_hooks=False``, ``SGL-SWA-DECODE-LEAK``).
LONG = 25
# Markdown's tables (``<table>``), not code blocks with line numbers (``<table class=...>``).
_TABLE = re.compile(r"<table>.*?</table>", re.S)
_TAG = re.compile(r"(<[^>]*>)")
_LONG_WORD = re.compile(rf"[^\s<>]{{{LONG},}}")
_BREAK = re.compile(r"(?<=[./])(?=[A-Za-z_])")  # not inside a version number (0.5.23)


def break_long_words(html: str) -> str:
    """``html`` with a ``<wbr>`` after every ``.`` and ``/`` followed by a letter or ``_``,
    inside the words of at least ``LONG`` characters of its Markdown tables' text."""

    def words(text: str) -> str:
        return _LONG_WORD.sub(lambda m: _BREAK.sub("<wbr>", m.group(0)), text)

    def table(match: re.Match[str]) -> str:
        parts = _TAG.split(match.group(0))
        return "".join(p if p.startswith("<") else words(p) for p in parts)

    return _TABLE.sub(table, html)
