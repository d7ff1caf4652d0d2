"""The notebook verbs for a fleet: :func:`launch_fleet`, :func:`attach_fleet` (``Fleet.stop``
stops it)."""

from __future__ import annotations

from typing import Any

from helpers.errors import CookbookError
from helpers.server.endpoint import server_root
from helpers.server.vllm_server import VLLMServer
from lab.fleet.deployment import Deployment
from lab.fleet.fleet import Fleet, running_fleets
from lab.fleet.router import RouterServer


def attach_fleet(url: str, deployment: Deployment, *, progress: bool = True) -> Fleet:
    """A handle on a fleet that already runs behind a router at ``url`` (``http://host:port``,
    ``/v1`` allowed): the router and the workers its ``GET /workers`` lists, each attached
    (:meth:`helpers.server.vllm_server.VLLMServer.attach`), so :meth:`Fleet.stop` leaves them running.

    Args:
        url: the router of a fleet you started (e.g. another notebook's, or a test's).
        deployment: the deployment it runs (labels, the served model name).
        progress: print ``[fleet]`` lines.

    Raises:
        CookbookError: nothing answers ``url``'s ``/health``, the router lists no worker, or
            a worker does not answer its own ``/health``.
    """
    root = server_root(url.strip())
    fl = Fleet(deployment, progress=progress)
    try:
        fl.router = RouterServer.attach(root)
    except CookbookError:
        raise CookbookError(
            f"No router answers {root}/health: check fleet_url (the router of a fleet you started, "
            "http://host:port) and that the port is reachable from here, or set fleet_url = None "
            "to launch a fleet (in code: launch_fleet(deployment))."
        ) from None
    workers = fl.router.workers()
    if not workers:
        raise CookbookError(
            f"The router at {root} lists no worker: add replicas to it, or launch a fleet."
        )
    fl.servers = [VLLMServer.attach(w["url"]) for w in workers]
    fl._say(f"attached: router {root}, {len(fl.servers)} workers (left running on stop)")
    return fl


def launch_fleet(deployment: Deployment, *, reuse: bool = True, **kwargs: Any) -> Fleet:
    """Start a :class:`Fleet` for ``deployment`` and wait until it serves (one notebook line).

    Re-running the cell never starts a second deployment beside the first (on the same
    GPUs): a fleet this kernel runs for the same deployment is reused (``reuse=True``),
    any other fleet, and a single server this kernel launched
    (:func:`helpers.server.launch.launch_server`), is stopped first. Each case is printed.

    Args:
        deployment: from :func:`lab.fleet.deployment.resolve_deployment`.
        reuse: reuse a running fleet of this kernel with the same deployment.
        **kwargs: :class:`Fleet` options.
    Raises:
        as :meth:`Fleet.start`.
    """
    from helpers.server.launch import running_servers

    for old in running_fleets():
        if reuse and old.is_running() and old._same_deployment(deployment):
            print(
                f"[fleet] reusing the fleet this kernel already runs: {old.describe()} "
                f"({old.base_url}; same deployment; stop() it first to start afresh)",
                flush=True,
            )
            return old
        print(
            f"[fleet] stopping the fleet this kernel started earlier ({old.describe()}): its "
            "deployment differs, and one kernel serves one deployment on these GPUs",
            flush=True,
        )
        old.stop(check=False)
    for srv in running_servers():
        if srv.part_of is None:
            print(
                f"[fleet] stopping the server this kernel started (pid {srv.pid}, port "
                f"{srv.port}): the fleet takes the GPUs",
                flush=True,
            )
            srv.stop()
    return Fleet(deployment, **kwargs).start()
