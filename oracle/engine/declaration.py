"""The ``--declare KEY=VALUE,...`` syntax: capabilities changed by a text declaration.

The same syntax serves the command line (``--declare``), the pytest plugin
(``--kvpool-declare``) and the capabilities line a run prints (``Capabilities.value_text``).
"""

from __future__ import annotations

import builtins
import importlib

from .capabilities import ERROR_FIELDS, Capabilities, field_names


def exception_class(name: str) -> type[BaseException]:
    """A builtin exception by name (``ValueError``) or a class by dotted path
    (``mypkg.errors.AllocError``). Raises ValueError naming what is wrong."""
    if "." not in name:
        found = getattr(builtins, name, None)
    else:
        module_name, _, attr = name.rpartition(".")
        try:
            found = getattr(importlib.import_module(module_name), attr, None)
        except ImportError as err:
            raise ValueError(f"checked: cannot import {module_name!r} ({err})") from None
    if not (isinstance(found, type) and issubclass(found, BaseException)):
        raise ValueError(f"checked: {name!r} is not an exception class")
    return found


def _parse_bool(key: str, value: str) -> bool:
    if value.lower() not in ("true", "false", "1", "0"):
        raise ValueError(f"{key} takes true or false, got {value!r}")
    return value.lower() in ("true", "1")


def _parse_types(key: str, value: str) -> object:
    if value.lower() in ("true", "false", "1", "0"):
        return _parse_bool(key, value)
    return tuple(exception_class(v) for v in value.split("+"))


def _parse_checked(value: str) -> object:
    """``checked``'s value: true/false, ``E1+E2``, or per call ``alloc+free:E1/alloc_extend:E2``."""
    if ":" not in value:
        return _parse_types("checked", value)
    per_call: dict[tuple[str, ...], object] = {}
    for group in value.split("/"):
        calls, sep, types = group.partition(":")
        if not sep or not calls.strip() or not types.strip():
            raise ValueError(f"checked takes CALL+CALL:ExceptionClass groups, got {group!r}")
        per_call[tuple(c.strip() for c in calls.split("+"))] = _parse_types("checked", types)
    return per_call


def parse_declaration(text: str, base: Capabilities, source: str = "option") -> Capabilities:
    """``base`` changed by ``"checked=ValueError,segments=disjoint,page_sizes=4+16"``.

    Booleans take true/false; ``page_sizes`` and ``need_sort`` take ``+``-separated values;
    ``checked`` takes true/false or ``+``-separated exception classes (a builtin name or a dotted
    path), or per call: ``checked=alloc+free:ValueError`` (only ``alloc`` and ``free`` are sent
    bad input), groups joined by ``/`` (``alloc:ValueError/free:KeyError``). The changed fields
    are recorded as coming from ``source``. Raises ValueError naming the bad item.
    """
    changes: dict[str, object] = {}
    names = [n for n in field_names(base) if n != "divergences"]
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        key, value = key.strip(), value.strip()
        if not sep or key not in names:
            raise ValueError(f"unknown capability {item!r} (fields: {', '.join(names)})")
        if key == "checked":
            changes[key] = _parse_checked(value)
        elif key in ERROR_FIELDS:
            changes[key] = _parse_types(key, value)
        elif key == "page_sizes":
            try:
                changes[key] = tuple(int(v) for v in value.split("+"))
            except ValueError:
                raise ValueError(f"page_sizes takes integers like 1+16, got {value!r}") from None
        elif key == "need_sort":
            changes[key] = tuple(_parse_bool(key, v) for v in value.split("+"))
        elif isinstance(getattr(base, key), bool):
            changes[key] = _parse_bool(key, value)
        else:
            changes[key] = value
    return base.with_source(source, **changes)


