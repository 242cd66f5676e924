"""shale.connect against a real three-node cluster (conftest.py's ``nodes``: the
shale-server binary named by $SHALE_SERVER, on loopback ports, stopped at the end)."""

import threading
import time

import pytest

import shale


def test_the_calls_of_a_db(cluster):
    assert cluster.put(b"apple", b"red") > 0
    cluster["pear"] = "green"
    assert cluster.get(b"apple") == b"red"
    assert cluster[b"pear"] == b"green"
    assert b"pear" in cluster and b"plum" not in cluster
    assert cluster.get(b"plum", b"none") == b"none"
    with pytest.raises(KeyError):
        cluster[b"plum"]
    del cluster[b"pear"]
    assert cluster.get(b"pear") is None

    with cluster.batch() as b:
        for i in range(2500):
            b.put(f"row/{i:05}", f"{i}")
        b.delete(b"apple")
    assert b.index > 0
    assert cluster.get(b"apple") is None
    rows = list(cluster.prefix(b"row/"))  # three pages
    assert len(rows) == 2500 and rows[0] == (b"row/00000", b"0")
    assert rows == sorted(rows)
    assert [k for k, _ in cluster.range(b"row/00010", b"row/00013")] == [
        b"row/00010", b"row/00011", b"row/00012"]
    with pytest.raises(RuntimeError):
        with cluster.batch() as b:
            b.put(b"never", b"1")
            raise RuntimeError("the block fails")
    assert cluster.get(b"never") is None

    assert cluster.compare_and_set(b"cas", None, b"1") == (True, None)
    assert cluster.compare_and_set(b"cas", b"2", b"3") == (False, b"1")
    assert cluster.compare_and_set(b"cas", b"1", None) == (True, b"1")
    assert cluster.get(b"cas") is None


def test_keyword_and_hybrid_search(cluster):
    cluster.define_index("docs", prefix=b"d/", model="hash", keywords="english")
    cluster.define_index("docs", prefix=b"d/", model="hash", keywords="english")  # again
    cluster[b"d/1"] = "the disk is full: ENOSPC on write"
    cluster[b"d/2"] = "a quiet afternoon by the river"
    hits = cluster.search("docs", "ENOSPC", mode="keywords", k=5)
    assert [h.key for h in hits] == [b"d/1"]
    assert hits[0].text.startswith("the disk")
    # Exact at every acknowledged write: a replaced text is found by its new words only.
    cluster[b"d/1"] = "nothing to see"
    assert cluster.search("docs", "ENOSPC", mode="keywords") == []
    for fusion in ["rrf", "minmax"]:  # the spellings of DB's VectorIndex.search and the CLI
        hybrid = cluster.search("docs", "river afternoon", mode="hybrid", fusion=fusion, k=2)
        assert hybrid[0].key == b"d/2", fusion
    with pytest.raises(shale.InvalidArgumentError):
        cluster.search("docs", "river", mode="hybrid", fusion="min_max")
    with pytest.raises(shale.NotFoundError) as missing:
        cluster.search("no-such-index", "x")
    assert isinstance(missing.value, shale.ClusterError) and isinstance(missing.value, LookupError)


def test_a_backup_is_written(cluster, tmp_path):
    cluster.put(b"backed", b"up")
    size = cluster.backup(tmp_path / "backup.snap")
    assert size == (tmp_path / "backup.snap").stat().st_size > 0


def test_errors_are_typed(cluster):
    with pytest.raises(shale.InvalidArgumentError):
        cluster.put(b"\xffreserved", b"v")
    with pytest.raises(shale.InvalidArgumentError):
        cluster.define_index("bad name!", prefix=b"x/", dim=3)
    with pytest.raises(shale.InvalidArgumentError):
        cluster.search("docs", "x", mode="sideways")
    with pytest.raises(TypeError):
        cluster.put(3, b"v")
    nowhere = shale.connect(["127.0.0.1:1"], deadline=0.5)
    with pytest.raises(shale.DeadlineError) as e:
        nowhere.get(b"k")
    assert isinstance(e.value, TimeoutError) and isinstance(e.value, shale.ClusterError)


def test_threads_write_at_once(cluster):
    def write(t):
        for i in range(40):
            cluster.put(f"t{t}/{i}", f"{t}-{i}")

    threads = [threading.Thread(target=write, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for t in range(4):
        assert len(list(cluster.prefix(f"t{t}/"))) == 40


def test_writes_go_on_through_a_leader_kill(nodes, cluster):
    leader = cluster.status(nodes.addrs[1])["leader_id"]
    assert leader in nodes.addrs
    acked = []
    for i in range(30):
        if i == 10:
            nodes.kill(leader)
        cluster.put(f"k/{i}", f"{i}")  # retried through the election, applied once
        acked.append(i)
    assert [v for _, v in cluster.prefix(b"k/")] == sorted(
        f"{i}".encode() for i in acked)
    nodes.start(leader)
    index = cluster.put(b"after", b"the restart")
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            if cluster.status(nodes.addrs[leader])["applied_index"] >= index:
                break
        except shale.ClusterError:
            pass  # not listening yet
        time.sleep(0.2)
    else:
        pytest.fail(f"node {leader} did not catch up after its restart")


def test_a_call_waits_without_the_gil():
    # A call that waits out its whole deadline (no node listens there) while this thread
    # keeps running Python: with the GIL held it would stop for the whole second.
    nowhere = shale.connect(["127.0.0.1:1"], deadline=1.0)
    waiter = threading.Thread(target=lambda: pytest.raises(shale.DeadlineError, nowhere.get, b"k"))
    waiter.start()
    time.sleep(0.05)
    gaps, last = [], time.perf_counter()
    while waiter.is_alive():
        now = time.perf_counter()
        gaps.append(now - last)
        last = now
    waiter.join()
    assert len(gaps) > 100 and max(gaps) < 0.5, (len(gaps), max(gaps))
