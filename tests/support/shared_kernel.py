"""One Jupyter kernel shared by several notebook runs in the test suite (imports paid once).

The suite's own tool (a user's run always gets a fresh kernel): notebooks that attach to
the session's server execute one after another in it, each in an emptied namespace.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from helpers.errors import CookbookError
from tools.notebook_build import NOTEBOOK_DIR
from tools.notebook_run import kernel_config


class SharedKernel:
    """One Jupyter kernel that several :func:`tools.notebook_run.run_notebook` calls execute
    in, one after another, so the imports every notebook repeats (``helpers``, pandas,
    matplotlib, and vLLM's benchmark module: about 15 s of CPU on 2 cores each) are paid once.

    Before each notebook the kernel's namespace is emptied (IPython's ``%reset -f``), every
    figure closed, the working folder set to the notebook's and the variables of
    :data:`tools.notebook_run.FOLLOWED_ENV` set to the caller's values at that moment (as a
    fresh kernel would inherit them): each notebook still sees none of the previous one's variables. What
    stays is ``sys.modules`` (and module-level caches of the imported packages). A user's
    run (``python -m tools.notebooks run``, ``make quickstart``) always gets a fresh
    kernel; the test suite shares one between notebooks that attach to the same server.

    Use as a context manager; the kernel process is shut down (and waited for) on exit::

        with SharedKernel() as kernel:
            for nb in paths:
                notebook_run.run_notebook(nb, params, kernel=kernel)
    """

    def __init__(self, kernel_name: str = "python3"):
        self.kernel_name = kernel_name
        self.km = None
        self.runs = 0

    def __enter__(self) -> SharedKernel:
        import tempfile

        from jupyter_client.manager import KernelManager

        # IPC sockets at an absolute path: each run executes from its notebook's folder
        # (papermill's cwd), the kernel's default socket path is relative to where it started
        self._sockets = tempfile.TemporaryDirectory(prefix="cookbook-kernel-")
        self.km = KernelManager(
            kernel_name=self.kernel_name,
            config=kernel_config(),
            ip=str(Path(self._sockets.name) / "kernel"),
        )
        self.km.start_kernel(cwd=str(NOTEBOOK_DIR))
        return self

    def reset(self, cwd: Path, env: Mapping[str, str | None] | None = None) -> None:
        """Empty the namespace, close figures, ``chdir`` to ``cwd``, set ``env`` in the
        kernel's ``os.environ`` (None unsets a variable); blocks until done.

        Raises:
            CookbookError: the kernel died or did not answer within 60 s.
        """
        if self.km is None or not self.km.is_alive():
            raise CookbookError(
                "the shared kernel is not running: use it inside `with SharedKernel() as k:`"
            )
        kc = self.km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=60)
            setenv = "".join(
                f"_os.environ[{k!r}] = {v!r}\n"
                if v is not None
                else f"_os.environ.pop({k!r}, None)\n"
                for k, v in (env or {}).items()
            )
            code = (
                "%reset -f\nimport os as _os, sys as _sys\n"
                f"_os.chdir({str(cwd)!r})\n" + setenv + "if 'matplotlib.pyplot' in _sys.modules: "
                "_sys.modules['matplotlib.pyplot'].close('all')\n"
                "del _os, _sys"
            )
            reply = kc.execute_interactive(
                code, timeout=60, store_history=False, output_hook=lambda msg: None
            )
            if reply["content"]["status"] != "ok":
                raise CookbookError(
                    f"resetting the shared kernel failed: {reply['content'].get('evalue')}"
                )
        except TimeoutError as exc:
            raise CookbookError("the shared kernel did not answer within 60 s") from exc
        finally:
            kc.stop_channels()
        self.runs += 1

    def __exit__(self, *exc) -> None:
        if self.km is not None and self.km.has_kernel:
            self.km.shutdown_kernel(now=True)
        self.km = None
        if getattr(self, "_sockets", None) is not None:
            self._sockets.cleanup()
