"""What several test folders share: the recorded-reply server (:mod:`.chat_replay`), the fake
hub and fake vLLM server, process checks, the shared notebook kernel, notebook output checks,
and the scripts that record ``tests/data/`` (run them by path from the repository root, e.g.
``python tests/support/chat_replay.py --write-fixtures``).

Imported as ``tests.support.<module>`` (the repository root is on pytest's ``pythonpath``).
"""

from __future__ import annotations

from pathlib import Path

#: ``tests/``
TESTS = Path(__file__).resolve().parents[1]
#: ``tests/data/``: the recorded fixtures every test folder reads
DATA = TESTS / "data"
