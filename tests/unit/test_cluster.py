"""`--cluster` and `--workers` when the cluster or a worker fails: one line and exit 2, in bounded time, for a
malformed or unsupported address, a server that never answers, a garbage server, a cluster without workers,
workers that keep dying and a killed local worker process (analysis/cluster.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from rooftop.analysis import cluster
from rooftop.analysis.cluster import ClusterError, check_address, local_parts, result
from tests.conftest import run_cli

pytest.importorskip("distributed")


@pytest.fixture
def hosts(tmp_path: Path) -> Path:
    for i in range(2):
        (tmp_path / f"host{i}.xplane.pb").write_bytes(b"x")
    return tmp_path


def _serve(reply: bytes | None) -> Iterator[str]:
    """A TCP server on localhost that accepts and sends ``reply`` (None: never answers)."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    conns: list[socket.socket] = []

    def loop() -> None:
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            conns.append(conn)
            if reply is not None:
                conn.sendall(reply)

    threading.Thread(target=loop, daemon=True).start()
    yield f"tcp://127.0.0.1:{srv.getsockname()[1]}"
    srv.close()
    for c in conns:
        c.close()


@pytest.fixture
def silent() -> Iterator[str]:
    yield from _serve(None)


@pytest.fixture
def http() -> Iterator[str]:
    yield from _serve(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")


@pytest.mark.parametrize(
    ("address", "says"),
    [("tls://10.0.0.5:8786", "certificates"), ("ucx://10.0.0.5:8786", "UCX"), ("tcp://host:notaport", "port"),
     ("tcp://:8786", "HOST:PORT"), ("10.0.0.5", "HOST:PORT"), ("tcp://h:70000", "1-65535"), ("ws://h:1", "tcp://")],
)  # fmt: skip
def test_an_address_rooftop_cannot_use_is_refused_before_connecting(address: str, says: str) -> None:
    with pytest.raises(ClusterError, match=says):
        check_address(address)
    assert check_address("10.0.0.5:8786") == "tcp://10.0.0.5:8786"


def test_a_server_that_never_answers_is_one_line_in_bounded_time(
    hosts: Path, silent: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cluster, "CONNECT_TIMEOUT_S", 1.0)
    start = time.monotonic()
    code, out, err = run_cli("profile", str(hosts), "--chip", "h100", "--cluster", silent)
    assert code == 2 and out == "" and err.count("\n") == 1 and "no Dask scheduler answered" in err, err
    assert time.monotonic() - start < 30


def test_a_garbage_server_is_one_line_and_nothing_more_at_exit(hosts: Path, http: str) -> None:
    """An HTTP server's reply read as a Dask frame asked for 3 EiB (MemoryError); the half-made client then
    printed a 9-line traceback from its __del__ 20 s later: one line now, in the process as it exits."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    done = subprocess.run(
        [sys.executable, "-m", "rooftop.cli.main", "profile", str(hosts), "--chip", "h100", "--cluster", http],
        env={**os.environ, "PYTHONPATH": src}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "cannot reach a Dask scheduler there" in done.stderr


def test_a_cluster_without_workers_stops_instead_of_waiting_forever(
    hosts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All workers killed mid-run left the hosts' futures pending forever."""
    from distributed import LocalCluster

    monkeypatch.setattr(cluster, "NO_WORKERS_S", 1.0)
    monkeypatch.setattr(cluster, "POLL_S", 0.2)
    with LocalCluster(n_workers=0, processes=False, protocol="tcp://", dashboard_address=None) as lc:
        code, _, err = run_cli("profile", str(hosts), "--chip", "h100", "--cluster", lc.scheduler_address)
    assert code == 2 and err.count("\n") == 1 and "has had no worker for 1 s with 2 of 2 hosts left" in err, err


class _Failed:
    def __init__(self, exc: BaseException) -> None:
        self.exc = exc

    def result(self) -> None:
        raise self.exc


def test_workers_that_keep_dying_or_fail_are_one_line_naming_the_host() -> None:
    from distributed import KilledWorker

    with pytest.raises(ClusterError, match=r"host 'h3.xplane.pb': the workers reducing it kept dying"):
        died = KilledWorker("rooftop-host-3", "tcp://w:1", 3)  # type: ignore[arg-type]  # an address for the worker
        result(_Failed(died), Path("h3.xplane.pb"), "tcp://s:1")
    with pytest.raises(ClusterError, match=r"a worker failed: ModuleNotFoundError: .no rooftop."):
        result(_Failed(ModuleNotFoundError("no rooftop")), Path("h3.xplane.pb"), "tcp://s:1")


def _die(path: Path) -> None:
    os._exit(9)


def test_a_killed_local_worker_process_is_one_line(tmp_path: Path) -> None:
    files = [tmp_path / "a.xplane.pb", tmp_path / "b.xplane.pb"]
    with pytest.raises(ClusterError, match="a worker process died"):
        list(local_parts(_die, files, (), 2))
