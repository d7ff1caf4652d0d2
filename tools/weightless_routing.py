"""The one sentence every generated results page says about MoE routing on dummy weights.

Read in the wheels (vLLM 0.28.0 and 0.32.0 ``model_executor/model_loader/weight_utils.py``
``initialize_single_dummy_weight``; 0.33.0 and 0.34.0 ``model_executor/layers/layernorm.py:70``)
and measured by ``benchmarks/dummy_moe_routing.py`` (the numbers below). Used by
:mod:`tools.results_pages`, :mod:`tools.drafting_pages` and :mod:`tools.tune_pages`, each of
which adds what it means for its own table.
"""

from __future__ import annotations

#: vLLM's uniform routing simulation (vllm/envs.py ``VLLM_MOE_ROUTING_SIMULATION_STRATEGY``,
#: ``RoutingSimulatorRouter`` in fused_moe/router/router_factory.py, 0.32.0-0.34.0): every
#: token's top-k experts drawn uniformly at random, the same routing on every release.
ROUTING_ENV = "VLLM_MOE_ROUTING_SIMULATION_STRATEGY"
UNIFORM_ROUTING_ENV = {ROUTING_ENV: "uniform_random"}


def uniform_routing(command: str | None) -> bool:
    """Whether a saved ``vllm serve`` command (``ServeConfig.shell_command``: env exported
    first) ran with :data:`UNIFORM_ROUTING_ENV`."""
    return f"{ROUTING_ENV}=uniform_random" in (command or "")


#: What vLLM's dummy weights do to Lightning's MoE routing, per release.
DUMMY_ROUTING = (
    "vLLM 0.28.0 and 0.32.0 fill a dummy model's norm weights with uniform(-1e-3, 1e-3), so "
    "every token of a step picks the same 6 of Lightning's 128 experts; 0.33.0 and 0.34.0 set "
    "them to 1.0, and 16 / 64 / 256 tokens pick 59.5 / 101.5 / 124.9 experts (uniform routing: "
    "68.6 / 122.1 / 128), as a trained router spreads them (`benchmarks/dummy_moe_routing.py`)"
)
#: Where the effect on speed is measured.
MEASURED_NEXT = (
    "the next H200 session measures it with vLLM's uniform routing simulation "
    "(`VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random`, tools/device/README.md)"
)
