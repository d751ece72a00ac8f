"""Whether a peer library is missing or broken: a missing peer may skip its tests outside CI,
a broken one (the peer's own import error, or one in kvpool's import shims) fails them.

The shims (:mod:`.peer_import`, :mod:`.kvcached_import`) raise :class:`PeerNotInstalled` for a
peer, source or third-party dependency that is absent, :class:`PeerUnavailable` for anything
else; tests ask :func:`may_skip`.
"""

from __future__ import annotations

import os


class PeerUnavailable(ImportError):
    """The peer library (SGLang 0.5.23) is not installed or cannot be imported here.

    Raised as is when the peer is installed but fails to import (its own error, or one in these
    shims): a test must then fail, never skip. :class:`PeerNotInstalled` when the peer or a
    dependency it imports is absent (``classify`` tells them apart)."""


class PeerNotInstalled(PeerUnavailable):
    """The peer, its source or a third-party module it imports is not installed here."""


def classify(message: str, exc: BaseException) -> PeerUnavailable:
    """``PeerNotInstalled(message)`` when ``exc`` is a ``ModuleNotFoundError`` for a module
    outside kvpool (a missing install), else ``PeerUnavailable(message)`` (an installed peer or
    a shim that fails: a bug). The result's ``__cause__`` is ``exc``."""
    missing = isinstance(exc, ModuleNotFoundError) and not (exc.name or "kvpool").startswith(
        "kvpool"
    )
    if isinstance(exc, PeerNotInstalled):
        missing = True
    out = (PeerNotInstalled if missing else PeerUnavailable)(message)
    out.__cause__ = exc
    return out


def may_skip(err: BaseException, *, ci: bool | None = None) -> bool:
    """Whether a test may skip on ``err`` (or an error it was raised from): only a peer that
    is not installed, and only outside CI (``CI`` unset; ``ci`` overrides the environment).
    An installed peer (or a shim) that fails to import, or anything under CI, must fail."""
    if ci is None:
        ci = bool(os.environ.get("CI"))
    if ci:
        return False
    seen: BaseException | None = err
    while seen is not None:
        if isinstance(seen, PeerNotInstalled):
            return True
        if isinstance(seen, PeerUnavailable):
            return False
        seen = seen.__cause__
    return False


# A script run in a child process exits with this status when its peer is not installed.
MISSING_STATUS = 3


def exit_if_missing(err: BaseException) -> None:
    """In a script run as a child process: exit with :data:`MISSING_STATUS` (after saying why on
    stderr) when ``err`` says a peer is not installed; return otherwise (the caller re-raises:
    an installed peer that fails is a failure, never a skip)."""
    import sys

    if may_skip(err, ci=False):
        print(f"peer not installed: {err}", file=sys.stderr)
        sys.exit(MISSING_STATUS)


def raise_if_child_missing(returncode: int, stderr: str) -> None:
    """In the parent of such a script: raise :class:`PeerNotInstalled` when the child exited with
    :data:`MISSING_STATUS` (the tests' availability rule then skips, outside CI only)."""
    if returncode == MISSING_STATUS:
        raise PeerNotInstalled(stderr.strip()[-300:] or "a peer is not installed")


def require_installed(module: str) -> None:
    """Raise :class:`PeerNotInstalled` when the top-level ``module`` (``"sglang"``) cannot be
    found here, without importing it: a cheap check before starting a child process that
    would only find the same."""
    import importlib.util

    if importlib.util.find_spec(module) is None:
        raise PeerNotInstalled(f"{module} is not installed")
