"""LoRA adapters served beside the base model: the registry, the stand-in's trained adapters, the checks before launch and the failures named."""
