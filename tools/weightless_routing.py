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
#: The sessions that measured the effect (tests/tools/test_dummy_moe_routing.py checks these
#: figures against their committed points): the two releases side by side at each routing
#: (H100), and MTP K=7 at equal routing (H200).
RELEASES_SESSION = "docs/results/h100/routing-2026-12-05"
ROUTING_SESSION = "docs/results/h200/routing-2026-12-05"
#: The notebook's own sweep of both releases in one session, uniform routing on both (H100).
SWEEP_SESSION = "docs/results/h100/vllm-0.34.0"
#: What those sessions measured, said after each page's own reading of it.
MEASURED = (
    "measured with 3 runs a point: on one H100 "
    f"(`{RELEASES_SESSION}/`), vLLM's uniform routing simulation "
    "(`VLLM_MOE_ROUTING_SIMULATION_STRATEGY=uniform_random`) slowed 0.32.0's recipe to 0.68x at "
    "16 requests (0.98x, a tie, at one), and 0.34.0 ran 0.72x of 0.32.0 at 16 with each "
    "release's own dummy routing but tied with uniform routing on both (1.03x at one request, "
    "0.99x at 16; runs not interleaved): at 16 requests the newer releases' slowdown is the "
    "dummy routing, not the engine, and in the H100 notebook's sweep of both releases in one "
    f"session (`{SWEEP_SESSION}/`, uniform routing, one run a point) 0.34.0 ties at 64 and "
    "256 too (0.97x, 0.96x: within the 5 % a single run allows); on one H200 "
    f"(`{ROUTING_SESSION}/`), MTP K=7 at acceptance 3.69 gives 1.49x the "
    "recipe at one user at equal routing (the drafting session's 1.95x as loaded was against "
    "another session's recipe) and ties at 16 (0.95x, at 15 requests in flight)"
)
