"""Where the hosts of a many-host profile are reduced (analysis/hosts.py): local worker processes, or the
workers of a Dask distributed cluster (``--cluster ADDRESS``, the dask extra).

Every way either can fail ends in one line (ClusterError, exit 2), never a hang or a traceback:

- the address: ``tcp://HOST:PORT`` or ``HOST:PORT`` only (``tls://`` needs certificates and ``ucx://`` the
  UCX bindings, neither of which rooftop takes); a malformed one is refused before any connection;
- connecting: CONNECT_TIMEOUT_S for the whole handshake (a server that accepts and never answers, an HTTP
  server, a garbage one whose first bytes read as a 3 EiB frame), in a thread this process does not wait for;
- running: a cluster with no workers for NO_WORKERS_S (all killed mid-run) is an error, not a wait forever;
  a host whose workers keep dying (KilledWorker), a lost scheduler, a worker without rooftop: one line each;
- a local pool whose process is killed (BrokenProcessPool): one line naming the host.

Trust: a Dask scheduler sends code and pickled data to the machine that connects, and this machine's
results are unpickled from it. Use ``--cluster`` only with a cluster you run yourself (docs/profiling.md).
"""

from __future__ import annotations

import multiprocessing
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import Any

from rooftop.errors import RooftopError, shown
from rooftop.reasons import Option, OptionError, Phrased
from rooftop.units import is_ascii_int

#: the parameters that name the Dask cluster's address and the local worker processes
CLUSTER = Option("cluster")
WORKERS = Option("workers")
DASK_EXTRA = (CLUSTER, " needs the dask extra: pip install 'rooftop[dask]'")
#: seconds to connect to the scheduler and finish its handshake
CONNECT_TIMEOUT_S = 20.0
#: seconds a cluster may have no worker at all before the run stops
NO_WORKERS_S = 60.0
#: seconds between two looks at the cluster while waiting for a host
POLL_S = 2.0


class ClusterError(Phrased):
    """The workers could not reduce the hosts: the cluster is unreachable, not a Dask scheduler, without
    workers, or its workers died."""


def check_address(address: str) -> str:
    """``address`` as Dask reads it (``tcp://HOST:PORT``), or a one-line error before any connection."""
    text = address.strip()
    scheme, sep, rest = text.partition("://")
    if not sep:
        scheme, rest = "tcp", text
    if scheme != "tcp":
        why = {"tls": "it needs certificates rooftop does not take", "ucx": "it needs the UCX bindings"}
        raise ClusterError(
            CLUSTER,
            f" {shown(address)}: only tcp:// scheduler addresses are read"
            + (f" ({why[scheme]})" if scheme in why else "")
            + "; e.g. tcp://10.0.0.5:8786",
        )
    host, colon, port = rest.rpartition(":")
    if not colon or not host.strip("[]") or not is_ascii_int(port) or not 0 < int(port) < 65536:
        raise ClusterError(CLUSTER, f" {shown(address)}: expected tcp://HOST:PORT with a port in 1-65535")
    return f"tcp://{rest}"


def _client_class() -> type:
    try:
        from distributed import Client
    except ImportError as exc:
        raise OptionError(*DASK_EXTRA) from exc

    class _Client(Client):
        def __del__(self) -> None:
            """Closed by the caller (``with``); one that never connected is not closed again at exit (20 s
            later, with a traceback)."""

    return _Client


def connect(address: str) -> Any:
    """A Dask client of the scheduler at ``address`` (check_address), connected within CONNECT_TIMEOUT_S."""
    url = check_address(address)
    client_class = _client_class()
    box: dict[str, Any] = {}

    def attempt() -> None:
        try:
            box["client"] = client_class(url, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
        except BaseException as exc:  # a garbage server: MemoryError for a 3 EiB frame, ValueError, OSError
            box["error"] = exc

    thread = threading.Thread(target=attempt, name="rooftop-cluster-connect", daemon=True)
    thread.start()
    thread.join(CONNECT_TIMEOUT_S + 5)
    if thread.is_alive():
        raise ClusterError(
            CLUSTER,
            f" {shown(address)}: no Dask scheduler answered within {CONNECT_TIMEOUT_S:g} s (a server "
            "that accepts and does not reply: is this the scheduler's address and port?)",
        )
    if "error" in box:
        exc = box["error"]
        raise ClusterError(
            CLUSTER,
            f" {shown(address)}: cannot reach a Dask scheduler there ({type(exc).__name__}: {shown(str(exc), 160)})",
        ) from None
    return box["client"]


def dask_parts(
    reduce: Callable[..., Any], files: Sequence[Path], args: tuple[Any, ...], address: str
) -> Iterator[tuple[int, Any]]:
    """``reduce(file, *args)`` of each file on the cluster's workers, as each finishes."""
    client = connect(address)
    with client:
        futures = {client.submit(reduce, str(f), *args, key=f"rooftop-host-{i}-{f.name}", pure=False): i
                   for i, f in enumerate(files)}  # fmt: skip
        pending, idle_since, looked = set(futures), time.monotonic(), time.monotonic()
        while pending:
            done = {f for f in pending if f.done()}
            pending -= done
            now = time.monotonic()
            if done:
                idle_since = now
            elif now - looked >= POLL_S:
                looked = now
                if _workers(client, address):
                    idle_since = now
                elif now - idle_since > NO_WORKERS_S:
                    raise ClusterError(
                        CLUSTER,
                        f" {shown(address)}: the cluster has had no worker for {NO_WORKERS_S:g} s with "
                        f"{len(pending)} of {len(files)} hosts left (were its workers stopped?)",
                    )
            else:
                time.sleep(0.02)
            for fut in done:
                i = futures[fut]
                yield i, result(fut, files[i], address)
                fut.release()


def _workers(client: Any, address: str) -> int:
    try:
        return len(client.scheduler_info().get("workers", {}))
    except Exception as exc:  # the scheduler went away: CommClosedError, OSError
        raise ClusterError(CLUSTER, f" {shown(address)}: lost the scheduler ({type(exc).__name__})") from None


def result(fut: Any, path: Path, address: str) -> Any:
    """A finished future's value; a worker's failure as one line naming the host."""
    try:
        return fut.result()
    except RooftopError:
        raise
    except Exception as exc:
        from distributed import KilledWorker

        if isinstance(exc, KilledWorker):
            why = "the workers reducing it kept dying (out of memory, or killed)"
        else:
            why = f"a worker failed: {type(exc).__name__}: {shown(str(exc), 160)}"
        raise ClusterError(CLUSTER, f" {shown(address)}: host {shown(path.name)}: {why}") from None


def local_parts(
    reduce: Callable[..., Any], files: Sequence[Path], args: tuple[Any, ...], workers: int
) -> Iterator[tuple[int, Any]]:
    """``reduce(file, *args)`` of each file in this process (``workers`` 1) or in a pool of processes."""
    if workers <= 1:
        for i, f in enumerate(files):
            yield i, reduce(f, *args)
        return
    context = multiprocessing.get_context("spawn")  # a forked JAX runtime may hang
    with ProcessPoolExecutor(min(workers, len(files)), mp_context=context) as pool:
        futures = {pool.submit(reduce, f, *args): i for i, f in enumerate(files)}
        for fut in as_completed(futures):
            try:
                part = fut.result()
            except BrokenProcessPool:
                name = files[futures[fut]].name
                raise ClusterError(
                    WORKERS,
                    f": a worker process died while reducing the hosts (at {shown(name)}: killed, or "
                    "out of memory); rerun, or with fewer ",
                    WORKERS,
                ) from None
            yield futures[fut], part
