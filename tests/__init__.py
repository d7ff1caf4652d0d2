"""The test suite: one folder per ``helpers`` sub-package (``tests/chat/``, ``tests/server/``,
...), one per ``lab`` sub-package under ``tests/lab/`` (``tests/lab/tune/``, ...), plus
``tests/notebooks/``, ``tests/tools/`` and ``tests/project/``; shared code in
``tests/support/`` (imported as ``tests.support.<module>``); recorded fixtures in
``tests/data/``. ``tests/conftest.py`` holds the session's shared servers and their xdist
groups."""
