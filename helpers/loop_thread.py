"""A coroutine run to its end on an event loop of its own, as a worker thread's target.

A Jupyter cell's thread already runs an event loop, so ``asyncio.run`` cannot be called there;
the benchmark point and the SDK agent run their coroutine in a worker thread instead.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any


def run_on_own_loop(make_coro: Callable[[], Awaitable[Any]], outcome: dict[str, Any]) -> None:
    """Run ``make_coro()`` to its end on a new event loop in the calling (worker) thread; tasks
    it left running are cancelled and awaited and the loop closed before this returns.

    Args:
        make_coro: called once, in this thread, to make the coroutine.
        outcome: filled in for the caller's thread: ``"cancel"`` (cancels the task from any
            thread; a no-op once the loop is closed) as soon as the task exists, then
            ``"result"`` or ``"error"`` (whatever it raised, ``BaseException`` included).
    """
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        task = loop.create_task(make_coro())
        outcome["cancel"] = lambda: loop.is_closed() or loop.call_soon_threadsafe(task.cancel)
        outcome["result"] = loop.run_until_complete(task)
    except BaseException as e:  # re-raised in the caller's thread
        outcome["error"] = e
    finally:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for t in pending:
            t.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


def stop_thread(thread: threading.Thread, timeout: float = 30.0, every: float = 5.0) -> bool:
    """Stop a worker thread: raise ``KeyboardInterrupt`` inside it (CPython's
    ``PyThreadState_SetAsyncExc``) until it ends, as Ctrl-C would in a main thread.

    In the benchmark point's ``asyncio.run(...)`` the exception cancels the in-flight request
    tasks and closes their connections, so the server stops generating for them; a tool past the
    tool loop's ``tool_timeout`` is stopped the same way.

    Args:
        timeout: seconds to keep trying (delivered only while the thread runs Python code, not
            while it blocks in C).
        every: seconds between two tries (time for a loop to cancel its tasks).

    Returns:
        True when the thread has ended.
    """
    import ctypes
    import time

    deadline = time.monotonic() + timeout
    while thread.is_alive() and time.monotonic() < deadline:
        if thread.ident is not None:
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(thread.ident), ctypes.py_object(KeyboardInterrupt)
            )
        thread.join(min(every, max(deadline - time.monotonic(), 0.0)))
    return not thread.is_alive()
