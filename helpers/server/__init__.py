"""One vLLM server process: launch, wait, stop, read its log, diagnose, review.

- ``launch``       the notebook verbs: ``launch_server``, ``attach_server``, ``stop_server``
- ``vllm_server``  :class:`VLLMServer`: one process's launch, wait, crash and stop
- ``command``      a config's launch argv and environment (as shell text) and what differs from the target's
- ``endpoint``     what a server at a URL serves, over HTTP; ``make_client``
- ``processes``    ports, process groups and the records of every launch
- ``httpio``       the one HTTP stack (``httpx``) for ``/health``, ``/metrics``, ``/v1/models``
- ``vllm_log``     every regex over vLLM's log wording, with the releases it was read in
- ``diagnose``     a failed start's log -> one sentence naming the fix; ``failures`` the sentences
- ``review``       what a running server's log says is wrong
- ``stall``        a running engine that stopped making progress, from ``/metrics``
"""
