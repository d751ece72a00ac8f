"""SGLang's own unified composite where kvpool's cannot serve.

kvpool's unified pools keep their page tables on the host; SGLang's index translator reads them
on the model's device. :class:`SGLangWhereKvpoolCannot`, mixed in first by the classes
``install()`` puts in SGLang's place, builds SGLang's class instead on another device (and
where a class's :meth:`~SGLangWhereKvpoolCannot.unserved` says so), with a warning: SGLang is
never left with a pool it cannot run.
"""

from __future__ import annotations

import warnings
from typing import Any, ClassVar

import torch

__all__ = ["SGLangWhereKvpoolCannot"]


class SGLangWhereKvpoolCannot:
    """Construction that builds SGLang's own composite (:attr:`sglang_class`) where kvpool's
    cannot serve, with a ``UserWarning`` naming why: a device other than the CPU (kvpool keeps
    the page tables on the host, and SGLang's index translator reads them on the device) or
    what :meth:`unserved` names. kvpool-only arguments (``checked``) are dropped for SGLang's.
    Mixed in first, so that ``install()`` never leaves SGLang with a pool it cannot run."""

    sglang_class: ClassVar[type]

    @classmethod
    def unserved(cls, kwargs: dict[str, Any]) -> str | None:
        """Why kvpool's composite cannot serve these constructor arguments, or None."""
        device = torch.device(kwargs.get("device", "cpu"))
        if device.type != "cpu":
            return (f"its page tables live on the host and SGLang's index translator reads "
                    f"them on {device}")
        return None

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        why = cls.unserved(kwargs)
        if why is None:
            return super().__new__(cls)
        warnings.warn(f"kvpool's {cls.__name__} is not used here ({why}): SGLang's own "
                      "composite is built", UserWarning, stacklevel=2)
        kwargs.pop("checked", None)
        return cls.sglang_class(*args, **kwargs)
