"""Fixtures of the Python tests: a database in a temporary directory, and a real
three-node cluster (the shale-server binary named by $SHALE_SERVER, which
scripts/test.sh passes, on loopback ports picked here, in a temporary directory, stopped
at the end of the module that asked for it)."""

import os
import signal
import socket
import subprocess
import uuid

import pytest

import shale


@pytest.fixture
def db_path(tmp_path):
    return str(tmp_path / "db")


@pytest.fixture
def db(db_path):
    with shale.open(db_path) as db:
        yield db


SERVER = os.environ.get("SHALE_SERVER")


def _free_ports(n):
    socks = [socket.socket() for _ in range(n)]
    for s in socks:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in socks]
    for s in socks:
        s.close()
    return ports


class _Nodes:
    def __init__(self, directory, splits=()):
        self.dir = directory
        self.splits = list(splits)
        ports = _free_ports(3)
        self.addrs = {i + 1: f"127.0.0.1:{p}" for i, p in enumerate(ports)}
        self.procs = {}

    def start(self, node):
        args = [SERVER, "--id", str(node), "--listen", self.addrs[node],
                "--data-dir", str(self.dir / f"node-{node}")]
        for peer, addr in self.addrs.items():
            if peer != node:
                args += ["--peer", f"{peer}={addr}"]
        for key in self.splits:
            args += ["--split", key]
        if node == 1:
            args.append("--bootstrap")
        log = open(self.dir / f"node-{node}.log", "ab")
        self.procs[node] = subprocess.Popen(args, stdout=log, stderr=log)

    def add(self, node):
        """Start node ``node`` on a new port, a member of nothing yet; its address."""
        self.addrs[node] = f"127.0.0.1:{_free_ports(1)[0]}"
        self.start(node)
        return self.addrs[node]

    def kill(self, node):
        self.procs[node].send_signal(signal.SIGKILL)
        self.procs[node].wait(10)

    def stop_all(self):
        for p in self.procs.values():
            if p.poll() is None:
                p.terminate()
        for p in self.procs.values():
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(10)


def _started(tmp_path_factory, splits=()):
    if not SERVER or not os.path.exists(SERVER):
        if os.environ.get("CI") == "true":
            pytest.fail("CI runs the cluster tests: set SHALE_SERVER to a shale-server binary")
        pytest.skip("SHALE_SERVER names no shale-server binary")
    n = _Nodes(tmp_path_factory.mktemp("cluster"), splits)
    for node in (2, 3, 1):
        n.start(node)
    return n


def _connected(nodes):
    c = shale.connect(",".join(nodes.addrs.values()), deadline=20.0)
    c.put(b"ready", b"1")  # retried until a leader is elected
    return c


@pytest.fixture(scope="module")
def nodes(tmp_path_factory):
    n = _started(tmp_path_factory)
    yield n
    n.stop_all()


@pytest.fixture(scope="module")
def cluster(nodes):
    return _connected(nodes)


@pytest.fixture(scope="module")
def sharded_nodes(tmp_path_factory):
    """Three nodes whose key space is split at ``h`` and ``p``: groups 1, 2 and 3."""
    n = _started(tmp_path_factory, splits=["h", "p"])
    yield n
    n.stop_all()


@pytest.fixture(scope="module")
def sharded(sharded_nodes):
    return _connected(sharded_nodes)


@pytest.fixture(scope="module")
def sharded_docs(tmp_path_factory):
    """A cluster whose key space is split at ``d/4`` and ``d/8``, inside one prefix."""
    n = _started(tmp_path_factory, splits=["d/4", "d/8"])
    yield _connected(n)
    n.stop_all()


@pytest.fixture
def unique_name():
    """A name no other test uses, for a store's index and key prefix on a shared cluster."""
    return "t" + uuid.uuid4().hex[:12]
