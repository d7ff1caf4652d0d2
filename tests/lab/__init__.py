"""The lab's tests (``lab``): one folder per ``lab`` sub-package (``tests/lab/tune/``,
``tests/lab/agents/``, ...)."""
