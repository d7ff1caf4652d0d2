"""Answer quality against a running server: accuracy with an interval, paired comparisons.

- ``stats``     Wilson interval, McNemar's exact test, the paired bootstrap
- ``accuracy``  one item set scored through lm-eval's ``local-chat-completions`` (:func:`~helpers.evals.accuracy.evaluate`)
- ``compare``   two configurations on the same items, paired (:func:`~helpers.evals.compare.compare`)
- ``lossless``  greedy outputs with and without speculative decoding, token by token
- ``budget``    accuracy and tokens spent against ``thinking_token_budget``
- ``step``      the notebooks' answer-quality step (:func:`~helpers.evals.step.quality_step`)
- ``lm_eval_child`` the lm-eval process the runs are scored in
"""
