"""The tiny, locally trained Nemotron-H that the CPU build of vLLM serves in place of the model.

- ``build``     build, cache and check the checkpoint (``python -m helpers.standin.build`` builds it)
- ``template``  its chat format: special tokens, ``chat_template.jinja``, ``render_chat``
- ``data``      ``cookbook/demo.yaml`` and the training sequences made from it
- ``train``     its recipe, tokenizer, model config and training loop
"""
