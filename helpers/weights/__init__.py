"""What is served: downloaded checkpoints, the weightless architecture, or the stand-in.

- ``prepare``     ``prepare(cfg, stand_in=..., ...)``: the run (its mode); ``fetch(run)``: what it serves
- ``download``    checkpoint and drafter downloads at pinned revisions (``huggingface_hub``)
- ``hub``         the hub's cache, offline mode, sizes, and its errors as fix-naming sentences
- ``weightless``  the exact architecture with ``--load-format dummy`` (sizing without a download)
- ``weightless_tokenizer``  a tokenizer of exactly ``vocab_size`` ids for weightless mode
"""
