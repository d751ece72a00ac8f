"""A fork server: each fuzz case runs in its own forked child, so a crash is a verdict.

Importing torch costs 1-2 s, so one long-lived server process imports torch, kvpool and SGLang
once, then forks one child per request. The child runs :func:`fuzz_exec.run_case` and writes its
JSON verdict into a pipe; the server waits for it and answers one JSON line: ``status`` (``ok``,
``exit`` with ``code`` or ``signal`` with ``signal`` and its name), the child's ``verdict`` (None
when it wrote none) and its stderr tail (where a sanitizer reports). A child that runs longer
than ``CHILD_TIMEOUT_S`` is killed by its own alarm (``signal`` SIGALRM).

Protocol (stdin / stdout, one JSON object a line): request ``{"case": ..., "target": ...}``.
The parent side is :class:`ForkServer`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

CHILD_TIMEOUT_S = 30
HERE = Path(__file__).resolve().parent


def _child(case: dict[str, Any], target: str, write_fd: int, err_fd: int) -> None:
    """Runs in the forked child: never returns."""
    os.dup2(err_fd, 1)  # stdout is the protocol channel: the child must not write to it
    os.dup2(err_fd, 2)
    signal.alarm(CHILD_TIMEOUT_S)
    import fuzz_exec

    try:
        verdict: Any = fuzz_exec.run_case(case, target)
    except BaseException as exc:  # a failed setup: reported, not a crash
        verdict = {"error": f"{type(exc).__name__}: {exc}"[:400]}
    with os.fdopen(write_fd, "w") as out:
        out.write(json.dumps(verdict))
    os._exit(0)


def _run_one(case: dict[str, Any], target: str) -> dict[str, Any]:
    read_fd, write_fd = os.pipe()
    with tempfile.TemporaryFile() as err:
        pid = os.fork()
        if pid == 0:
            os.close(read_fd)
            _child(case, target, write_fd, err.fileno())
        os.close(write_fd)
        with os.fdopen(read_fd) as pipe:
            text = pipe.read()
        _, status = os.waitpid(pid, 0)
        err.seek(0)
        raw = err.read().decode(errors="replace")
        stderr = raw if len(raw) <= 6000 else f"{raw[:3000]}\n...\n{raw[-3000:]}"
    answer: dict[str, Any] = {"verdict": json.loads(text) if text else None, "stderr": stderr}
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        answer.update(status="signal", signal=sig, signal_name=signal.Signals(sig).name)
    elif os.WEXITSTATUS(status) != 0:
        answer.update(status="exit", code=os.WEXITSTATUS(status))
    else:
        answer["status"] = "ok" if text else "exit"
        answer["code"] = 0
    return answer


def serve() -> None:
    """The server loop: import once, then one forked child per request line."""
    sys.path.insert(0, str(HERE))
    import fuzz_exec  # noqa: F401  -- imported once here, inherited by every child
    import torch  # noqa: F401
    from kvpool.impl import PagedTokenToKVPoolAllocator  # noqa: F401
    from kvpool.oracle.peers.peer_import import PeerUnavailable

    try:
        from kvpool.oracle.peers.peer_swa import load_sglang_swa
        load_sglang_swa()
    except PeerUnavailable:  # SGLang not installed: its requests report the error
        pass
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        request = json.loads(line)
        out.write(json.dumps(_run_one(request["case"], request["target"])) + "\n")
        out.flush()


class ForkServer:
    """The parent side: starts the server (environment inherited: ``LD_PRELOAD``,
    ``ASAN_OPTIONS``, ``PYTHONPATH`` reach every child) and runs cases one at a time."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self.proc = subprocess.Popen([sys.executable, str(HERE / "fuzz_server.py")],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                                     env=env)
        assert self.proc.stdout is not None
        ready = self.proc.stdout.readline()
        if not ready:
            raise RuntimeError(f"fuzz server died at start (rc {self.proc.wait()})")

    def run(self, case: dict[str, Any], target: str) -> dict[str, Any]:
        """The server's answer for ``case`` on ``target`` (see the module docstring)."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(json.dumps({"case": case, "target": target}) + "\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"fuzz server died (rc {self.proc.wait()})")
        answer: dict[str, Any] = json.loads(line)
        return answer

    def close(self) -> None:
        """Ends the server (its stdin closed: the loop ends)."""
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=30)
        if self.proc.stdout is not None:
            self.proc.stdout.close()


if __name__ == "__main__":
    serve()
