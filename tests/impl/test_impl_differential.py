"""Random valid call sequences: kvpool.impl equals the spec's AllocatorModel step by step.

Reference order: every step's return, ``get_all_free_pages()`` order and ``available_size()``
must be equal (every ``*-5`` / ``*-7`` clause, ``GROUP-4``, ``SORT-*``, ``SEG-5``), for token and
paged allocators, ``need_sort`` on and off, checked and unchecked (the scheduler:
``impl_scheduler.py``; caller errors: the oracle, ``test_impl_oracle.py``). Hypothesis drives
it (shrinking failures to short traces); a seeded soak adds broad, uniform coverage. ci
profile: about 10 s together.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from impl_scheduler import Driver, HypothesisChooser, RandomChooser, choose_config


@given(data=st.data())
def test_impl_matches_model_step_by_step(data: Any) -> None:
    """Hypothesis-driven sequences of up to 40 calls."""
    choose = HypothesisChooser(data)
    Driver(choose, **choose_config(choose)).run(choose.integer(8, 40))


@pytest.mark.parametrize("seed", range(40))
def test_impl_matches_model_seeded_soak(seed: int) -> None:
    """Uniformly random sequences of 60 calls (seeded, reproducible by the test id)."""
    choose = RandomChooser(seed)
    Driver(choose, **choose_config(choose)).run(60)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@settings(max_examples=40)
@given(data=st.data())
def test_impl_matches_model_on_cuda(data: Any) -> None:
    """The same property with ``device="cuda"``."""
    choose = HypothesisChooser(data)
    Driver(choose, **choose_config(choose), device="cuda").run(choose.integer(8, 40))
