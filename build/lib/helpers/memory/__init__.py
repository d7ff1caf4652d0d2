"""Will it fit: the architecture's byte model and the memory planner, before any download.

- ``architecture``  Nemotron-H layer pattern, dtype sizes, KV and Mamba bytes, parameter counts
- ``planner``       ``plan(cfg)``: KV cache, Mamba state and how many sequences fit
- ``plan``          :class:`Plan`: its numbers, verdict and printouts
- ``tokenbudget``   the speculative token budget of one decoding step
"""
