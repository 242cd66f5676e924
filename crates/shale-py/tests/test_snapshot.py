"""Snapshots: reads and ranges at one point in time."""

import pytest

import shale


def test_snapshot_isolation(db):
    db[b"a"] = b"1"
    db[b"b"] = b"1"
    snap = db.snapshot()
    db[b"a"] = b"2"
    del db[b"b"]
    db[b"c"] = b"new"
    db.flush()
    db.compact()
    assert snap.get(b"a") == b"1"
    assert snap[b"b"] == b"1"
    assert snap.get(b"c") is None
    assert b"c" not in snap
    with pytest.raises(KeyError):
        snap[b"c"]
    assert list(snap) == [(b"a", b"1"), (b"b", b"1")]
    assert list(snap.range(b"b")) == [(b"b", b"1")]
    assert list(snap.range(reverse=True)) == [(b"b", b"1"), (b"a", b"1")]
    assert list(snap.prefix(b"a")) == [(b"a", b"1")]
    assert db[b"a"] == b"2"
    snap.release()


def test_snapshot_context_manager_releases(db):
    db[b"a"] = b"1"
    with db.snapshot() as snap:
        it = snap.range()
        db[b"a"] = b"2"
    assert "released" in repr(snap)
    with pytest.raises(shale.InvalidArgumentError):
        snap.get(b"a")
    # An iterator made before the release still reads at the snapshot.
    assert list(it) == [(b"a", b"1")]
