"""Outgrow one server: N replicas behind vLLM's router, or one data + expert parallel server.

- ``fleet``       :class:`Fleet`: the running replicas and router
- ``router``      ``vllm-router``: finding it, its options, :class:`RouterServer`
- ``deployment``  a :class:`Deployment` resolved from the registry, its shell commands
- ``render``      compose, KServe LLMInferenceService, production-stack values: one command each
"""
