"""The memory planner refuses arguments no GPU or workload has (a fresh user's list): each one
sentence naming the argument and the range, never a ZeroDivisionError or a plan that "FITS"
sequences of -1 tokens."""

from __future__ import annotations

import math

import pytest

from helpers.config.resolve import resolve
from helpers.errors import RecipeError
from helpers.memory.planner import plan


@pytest.mark.parametrize(
    "kwargs, named",
    [
        ({"gpu_memory_gb": 0}, "plan(gpu_memory_gb=0): pass a finite number above 0 (GiB)"),
        ({"gpu_memory_gb": math.inf}, "gpu_memory_gb=inf"),
        ({"gpu_memory_gb": -5}, "gpu_memory_gb=-5"),
        ({"kv_budget_gb": math.nan}, "kv_budget_gb=nan"),
        ({"kv_budget_gb": -1}, "kv_budget_gb=-1"),
        ({"context_len": -1}, "plan(context_len=-1): pass a finite number above 0 (tokens)"),
        ({"activation_reserve_gb": -10}, "activation_reserve_gb=-10): pass a finite number 0 or more"),
        ({"shared_prefix": -3}, "shared_prefix=-3"),
        ({"max_model_len": 4096, "context_len": 100_000}, "longer than a request may be (max_model_len 4,096"),
    ],
)  # fmt: skip
def test_an_argument_out_of_range_is_refused_naming_it(kwargs, named):
    with pytest.raises(RecipeError) as err:
        plan(resolve("l4"), **kwargs)
    assert named in str(err.value)


def test_the_edges_of_the_ranges_still_plan():
    import numpy as np

    cfg = resolve("l4")
    assert plan(cfg, activation_reserve_gb=0, shared_prefix=0).num_blocks > 0
    assert plan(cfg, max_model_len=4096, context_len=4096).context_len == 4096
    # numbers as pandas hands them out are numbers; a bool is not
    assert plan(cfg, context_len=np.int64(4096), gpu_memory_gb=np.float32(24)).num_blocks > 0
    with pytest.raises(RecipeError, match=r"plan\(context_len=True\)"):
        plan(cfg, context_len=True)
