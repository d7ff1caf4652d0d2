"""The one sentence every generated results page says about MoE routing on dummy weights.

Read in the wheels (vLLM 0.28.0 and 0.32.0 ``model_executor/model_loader/weight_utils.py``
``initialize_single_dummy_weight``; 0.33.0 and 0.34.0 ``model_executor/layers/layernorm.py:70``)
and measured by ``benchmarks/dummy_moe_routing.py`` (the numbers below). Used by
:mod:`tools.results_pages`, :mod:`tools.drafting_pages` and :mod:`tools.tune_pages`, each of
which adds what it means for its own table.
"""

from __future__ import annotations

# vLLM's uniform routing simulation (``RoutingSimulatorRouter``, fused_moe/router/
# router_factory.py): every weightless server sets it (helpers.weights.weightless.arch_config);
# ``AS_LOADED_ENV`` keeps the dummy weights' own routing, for a comparison with it.
from helpers.weights.weightless import ROUTING_ENV, UNIFORM_ROUTING_ENV  # noqa: F401

AS_LOADED_ENV = {ROUTING_ENV: ""}


def uniform_routing(command: str | None) -> bool:
    """Whether a saved ``vllm serve`` command (``ServeConfig.shell_command``: env exported
    first) ran with :data:`UNIFORM_ROUTING_ENV`."""
    return f"{ROUTING_ENV}=uniform_random" in (command or "")


#: What vLLM's dummy weights do to Lightning's MoE routing, per release.
DUMMY_ROUTING = (
    "vLLM 0.28.0 and 0.32.0 fill a dummy model's norm weights with uniform(-1e-3, 1e-3), so "
    "every token of a step picks the same 6 of Lightning's 128 experts; 0.33.0 and 0.34.0 set "
    "them to 1.0, and 16 / 64 / 256 tokens pick 59.5 / 101.5 / 124.9 experts (uniform routing: "
    "68.6 / 122.1 / 128), spread over many experts as a trained router's are "
    "(`benchmarks/dummy_moe_routing.py`)"
)
#: The session that measured the effect (tests/tools/test_dummy_moe_routing.py checks these
#: figures against its committed points).
ROUTING_SESSION = "docs/results/h200/routing-2026-12-05"
#: What that session measured, said after each page's own reading of it.
MEASURED = (
    "measured on one H200 with vLLM 0.32.0, 3 runs a point "
    f"(`{ROUTING_SESSION}/`): with vLLM's uniform routing simulation "
    "(`VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random`) the recipe ties at one request "
    "(0.98x) and ran 0.79x at 16 (a tie by the 27 % spread of the runs as loaded, though each "
    "uniform run was below each run as loaded), and MTP K=7 at acceptance 3.69 gives 1.49x the "
    "recipe at one user at equal routing (the drafting session's 1.95x as loaded was against "
    "another session's recipe) and ties at 16 (0.95x, at 15 requests in flight)"
)
