"""The deployment registry and what it resolves to, the first step of every notebook.

- ``schema``      typed pydantic models of ``cookbook/recipe.yaml`` and ``cookbook/flags.yaml``
- ``load``        reading, caching and one-message-per-problem errors
- ``resolve``     ``resolve(target, variant, speculative, features)`` -> :class:`ServeConfig`
- ``serveconfig`` :class:`ServeConfig`: argv, env, shell / docker / truss renderings
- ``flagcheck``   values vLLM would refuse, and vLLM's own ``vllm serve`` parser
- ``flagtable``   the committed flag table of each offered vLLM release (``docs/results/flags``)
- ``versions``    which vLLM is installed, and comparing releases
- ``parameters``  a notebook's parameters checked against their declared types
"""
