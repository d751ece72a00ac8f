"""The hybrid call table: every call the hybrid oracle makes on a sliding-window allocator.

``HYBRID_CALLS[name]`` holds, per call, the invocation on :class:`kvpool.spec.HybridModel`
(``spec``: plain lists), the invocation on a target with SGLang 0.5.23's signatures (``target``:
tensors on the device, ``*_cpu`` host copies, a resize config) and the same call as Python
source for a repro (``source``). Arguments are plain values (ints, lists of ints, segments as
``[[slots], start_pos]``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import torch
from kvpool.spec import HybridModel, HybridResizeConfig

Args = Mapping[str, Any]


@dataclass(frozen=True)
class HybridCall:
    """One call of the hybrid table (see the module docstring)."""

    name: str
    spec: Callable[[HybridModel, Args, Any], Any]
    target: Callable[[Any, Args, str, Any], Any]
    source: Callable[[Args], str]
    returns_slots: bool = False


class EvictRecorder:
    """A tree cache that records the eviction requests of the capacity hooks (``SWA-17``).

    SGLang's form (``supports_prefix_sharing()``, ``evict_for_alloc(EvictParams)``) and the
    spec's (``evict(num_tokens, swa_num_tokens)``) land in the same list; nothing is evicted.
    """

    def __init__(self) -> None:
        self.requests: list[tuple[int, int]] = []

    def supports_prefix_sharing(self) -> bool:
        return True

    def evict_for_alloc(self, params: Any) -> None:
        self.requests.append((int(params.num_tokens), int(params.swa_num_tokens)))

    def evict(self, num_tokens: int, swa_num_tokens: int) -> None:
        self.requests.append((num_tokens, swa_num_tokens))


def t(values: Any, device: str = "cpu") -> torch.Tensor:
    """``values`` as an int64 tensor."""
    return torch.tensor(list(values), dtype=torch.int64, device=device)


def _slots(name: str) -> HybridCall:
    return HybridCall(
        name,
        spec=lambda m, a, cache: getattr(m, name)(a["free_index"]),
        target=lambda x, a, dev, cache: getattr(x, name)(t(a["free_index"], dev)),
        source=lambda a: f"a.{name}(t({a['free_index']!r}))")


def _segments(name: str) -> HybridCall:
    return HybridCall(
        name,
        spec=lambda m, a, cache: getattr(m, name)([(s, p) for s, p in a["segments"]]),
        target=lambda x, a, dev, cache: getattr(x, name)(
            [(t(s, dev), p) for s, p in a["segments"]]),
        source=lambda a: f"a.{name}([{', '.join(f'(t({s!r}), {p})' for s, p in a['segments'])}])")


def _plain(name: str) -> HybridCall:
    return HybridCall(name, spec=lambda m, a, cache: getattr(m, name)(),
                      target=lambda x, a, dev, cache: getattr(x, name)(),
                      source=lambda a: f"a.{name}()")


def _extend_target(x: Any, a: Args, dev: str, cache: Any) -> Any:
    pre, seq = a["prefix_lens"], a["seq_lens"]
    return x.alloc_extend(t(pre, dev), t(pre), t(seq, dev), t(seq), t(a["last_loc"], dev),
                          a["extend_num_tokens"])


def _capacity(name: str) -> HybridCall:
    def spec(m: HybridModel, a: Args, cache: Any) -> Any:
        if name == "check_decode_capacity":
            return m.check_decode_capacity(num_tokens=a["num_tokens"], tree_cache=cache)
        return m.evict_to_free_tokens(cache, a["num_tokens"])

    def target(x: Any, a: Args, dev: str, cache: Any) -> Any:
        if name == "check_decode_capacity":
            return x.check_decode_capacity(num_tokens=a["num_tokens"], tree_cache=cache)
        return x.evict_to_free_tokens(cache, a["num_tokens"])

    return HybridCall(name, spec, target,
                      source=lambda a: f"a.{name}(cache, {a['num_tokens']})")


def _resize_config(a: Args) -> HybridResizeConfig:
    return HybridResizeConfig(full_max_total_num_tokens=a["size"],
                              swa_max_total_num_tokens=a["size_swa"])


HYBRID_CALLS: dict[str, HybridCall] = {
    "alloc": HybridCall(
        "alloc", spec=lambda m, a, cache: m.alloc(a["need_size"]),
        target=lambda x, a, dev, cache: x.alloc(a["need_size"]),
        source=lambda a: f"out = a.alloc({a['need_size']})", returns_slots=True),
    "alloc_extend": HybridCall(
        "alloc_extend",
        spec=lambda m, a, cache: m.alloc_extend(a["prefix_lens"], a["seq_lens"], a["last_loc"],
                                                a["extend_num_tokens"]),
        target=_extend_target,
        source=lambda a: (f"out = a.alloc_extend(t({a['prefix_lens']!r}), t({a['prefix_lens']!r}), "
                          f"t({a['seq_lens']!r}), t({a['seq_lens']!r}), t({a['last_loc']!r}), "
                          f"{a['extend_num_tokens']})"),
        returns_slots=True),
    "alloc_decode": HybridCall(
        "alloc_decode", spec=lambda m, a, cache: m.alloc_decode(a["seq_lens"], a["last_loc"]),
        target=lambda x, a, dev, cache: x.alloc_decode(t(a["seq_lens"], dev), t(a["seq_lens"]),
                                                       t(a["last_loc"], dev)),
        source=lambda a: (f"out = a.alloc_decode(t({a['seq_lens']!r}), t({a['seq_lens']!r}), "
                          f"t({a['last_loc']!r}))"),
        returns_slots=True),
    "free": _slots("free"),
    "free_swa": _slots("free_swa"),
    "free_full": _slots("free_full"),
    "free_swa_segment": HybridCall(
        "free_swa_segment",
        spec=lambda m, a, cache: m.free_swa_segment(a["free_index"], start_pos=a["start_pos"]),
        target=lambda x, a, dev, cache: x.free_swa_segment(t(a["free_index"], dev),
                                                           start_pos=a["start_pos"]),
        source=lambda a: f"a.free_swa_segment(t({a['free_index']!r}), start_pos={a['start_pos']})"),
    "free_segments": _segments("free_segments"),
    "free_full_segments": _segments("free_full_segments"),
    "translate_loc_from_full_to_swa": HybridCall(
        "translate_loc_from_full_to_swa",
        spec=lambda m, a, cache: m.translate_loc_from_full_to_swa(a["kv_indices"]),
        target=lambda x, a, dev, cache: x.translate_loc_from_full_to_swa(t(a["kv_indices"], dev)),
        source=lambda a: f"out = a.translate_loc_from_full_to_swa(t({a['kv_indices']!r}))",
        returns_slots=True),
    "free_group_begin": _plain("free_group_begin"),
    "free_group_end": _plain("free_group_end"),
    "clear": _plain("clear"),
    "resize": HybridCall(
        "resize", spec=lambda m, a, cache: m.resize(_resize_config(a)),
        target=lambda x, a, dev, cache: x.resize(SimpleNamespace(
            full_max_total_num_tokens=a["size"], swa_max_total_num_tokens=a["size_swa"])),
        source=lambda a: (f"a.resize(SimpleNamespace(full_max_total_num_tokens={a['size']}, "
                          f"swa_max_total_num_tokens={a['size_swa']}))")),
    "check_decode_capacity": _capacity("check_decode_capacity"),
    "evict_to_free_tokens": _capacity("evict_to_free_tokens"),
}
