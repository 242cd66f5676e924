"""Write batches: atomic commit on leaving the block, nothing written when it raises."""

import pytest

import shale


def test_batch_commits_on_exit(db):
    db[b"gone"] = b"x"
    with db.batch() as b:
        b.put(b"a", b"1")
        b.put("b", "2")
        b.delete(b"gone")
        assert len(b) == 3
        # Not visible before the block ends.
        assert b"a" not in db
    assert db[b"a"] == b"1"
    assert db[b"b"] == b"2"
    assert b"gone" not in db


def test_exception_inside_with_writes_nothing(db):
    db[b"keep"] = b"old"
    with pytest.raises(RuntimeError):
        with db.batch() as b:
            b.put(b"a", b"1")
            b.put(b"keep", b"new")
            b.delete(b"keep")
            raise RuntimeError("boom")
    assert b"a" not in db
    assert db[b"keep"] == b"old"


def test_batch_cannot_be_reused(db):
    b = db.batch(sync=True)
    b.put(b"a", b"1")
    b.write()
    assert db[b"a"] == b"1"
    with pytest.raises(shale.InvalidArgumentError):
        b.put(b"b", b"2")
    with pytest.raises(shale.InvalidArgumentError):
        b.write()


def test_explicit_write_inside_with_is_not_written_twice(db):
    with db.batch() as b:
        b.put(b"a", b"1")
        b.write()
    assert db[b"a"] == b"1"


def test_discard(db):
    b = db.batch()
    b.put(b"a", b"1")
    b.discard()
    assert len(b) == 0
    assert b"a" not in db


def test_batch_on_closed_db(db):
    b = db.batch()
    b.put(b"a", b"1")
    db.close()
    with pytest.raises(shale.ClosedError):
        b.write()


def test_large_batch_is_atomic_and_ordered(db):
    with db.batch() as b:
        for i in range(10_000):
            b.put(b"k%05d" % i, b"v%d" % i)
        b.put(b"k00000", b"last write wins")
    assert db[b"k00000"] == b"last write wins"
    assert db[b"k09999"] == b"v9999"


def test_transaction_commits_at_the_end_of_its_block(db):
    db[b"a"] = b"1"
    with db.transaction() as txn:
        assert txn.get(b"a") == b"1"
        txn.put(b"a", b"2")
        txn.delete(b"missing")
        assert txn.get(b"a") == b"2"
        assert db[b"a"] == b"1"
    assert db[b"a"] == b"2"


def test_transaction_conflict_and_discard(db):
    db[b"k"] = b"0"
    txn = db.transaction()
    txn.get(b"k")
    txn.put(b"k", b"mine")
    db[b"k"] = b"theirs"
    with pytest.raises(shale.ConflictError):
        txn.commit()
    assert db[b"k"] == b"theirs"
    with pytest.raises(shale.InvalidArgumentError):
        txn.put(b"k", b"again")  # ended
    with pytest.raises(RuntimeError):
        with db.transaction() as txn:
            txn.put(b"k", b"dropped")
            raise RuntimeError("abort")
    assert db[b"k"] == b"theirs"


def test_delete_range_removes_start_up_to_end(db):
    for k in [b"a", b"b1", b"b2", b"c"]:
        db[k] = b"v"
    db.delete_range(b"b", b"c")
    assert [k for k, _ in db.items()] == [b"a", b"c"]
    with db.batch() as b:
        b.delete_range("a", "b")
        b.put(b"a2", b"new")  # after the range delete in the batch: kept
    assert [k for k, _ in db.items()] == [b"a2", b"c"]
    with pytest.raises(shale.InvalidArgumentError):
        db.delete_range(b"z", b"a")
