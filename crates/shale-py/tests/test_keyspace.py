"""Keyspaces: dict-like handles of their own keys, batches across them, drops."""

import pytest

import shale


def test_keyspaces_hold_their_own_keys(db_path):
    with shale.open(db_path) as db:
        users = db.keyspace("users")
        log = db.keyspace("log", write_buffer_size=1 << 20, compression="zstd:3")
        db[b"k"] = b"default"
        users[b"k"] = b"users"
        log.put("k", "log")
        assert db[b"k"] == b"default"
        assert users[b"k"] == b"users"
        assert log.get(b"k") == b"log"
        assert b"k" in users and b"missing" not in users
        assert db.keyspaces() == ["default", "users", "log"]
        assert log.name == "log"
        assert log.options()["compression"] == "zstd:3"
        users[b"a"] = b"1"
        assert list(users.keys()) == [b"a", b"k"]
        assert list(users.range(b"b")) == [(b"k", b"users")]
        assert users.multi_get([b"k", b"zz"]) == [b"users", None]
        del users[b"a"]
        with pytest.raises(KeyError):
            del users[b"a"]
        users.delete_range(b"a", b"z")
        assert list(users) == []
        # New options for an existing keyspace: its next tables use them.
        log = db.keyspace("log", block_size=512)
        assert log.options()["block_size"] == 512
    with shale.open(db_path) as db:
        assert db.keyspaces() == ["default", "users", "log"]
        log = db.keyspace("log")
        assert log[b"k"] == b"log"
        assert log.options()["write_buffer_size"] == 1 << 20
        assert log.options()["block_size"] == 512


def test_a_batch_spans_keyspaces(db):
    a = db.keyspace("a")
    with db.batch(sync=True) as b:
        b.put(b"x", b"1", keyspace=a)
        b.put(b"x", b"0")
        b.delete(b"gone", keyspace=a)
    assert a[b"x"] == b"1"
    assert db[b"x"] == b"0"


def test_a_dropped_keyspace_refuses_its_handle(db):
    tmp = db.keyspace("tmp")
    tmp[b"k"] = b"v"
    db.drop_keyspace("tmp")
    assert db.keyspaces() == ["default"]
    with pytest.raises(shale.InvalidArgumentError):
        tmp.get(b"k")
    with pytest.raises(shale.InvalidArgumentError):
        db.drop_keyspace("default")
    assert db.keyspace("tmp").get(b"k") is None


def test_bad_names_and_options_are_refused(db):
    with pytest.raises(shale.InvalidArgumentError):
        db.keyspace("")
    with pytest.raises(shale.InvalidArgumentError):
        db.keyspace("x", compression="brotli")
    with pytest.raises(shale.InvalidArgumentError):
        db.keyspace("x", block_size=1)


def test_a_closed_database_closes_its_keyspaces(db_path):
    db = shale.open(db_path)
    ks = db.keyspace("ks")
    db.close()
    with pytest.raises(shale.ClosedError):
        ks.get(b"k")


def test_an_index_covers_a_keyspace(db):
    np = pytest.importorskip("numpy")
    notes = db.keyspace("notes")
    index = db.index("notes", prefix=b"v/", keyspace="notes", dim=3)
    index.put_vector(b"v/a", np.array([1.0, 0.0, 0.0], dtype=np.float32), b"a")
    db[b"v/b"] = b"plain data in the default keyspace"
    index.wait_indexed()
    assert len(index) == 1
    hits = index.search(vector=np.array([1.0, 0.0, 0.0], dtype=np.float32), k=2)
    assert [h.key for h in hits] == [b"v/a"]
    assert b"v/a" in notes and b"v/a" not in db
    with pytest.raises(shale.InvalidArgumentError):
        db.drop_keyspace("notes")


def test_a_transaction_spans_keyspaces(db):
    savings = db.keyspace("savings")
    db[b"alice"] = b"10"
    savings[b"alice"] = b"5"
    with db.transaction() as txn:
        checking = int(txn.get(b"alice"))
        saved = int(txn.get(b"alice", keyspace=savings))
        txn.put(b"alice", b"%d" % (checking - 3))
        txn.put(b"alice", b"%d" % (saved + 3), keyspace=savings)
    assert (db[b"alice"], savings[b"alice"]) == (b"7", b"8")
    txn = db.transaction()
    txn.get(b"alice", keyspace=savings)
    txn.delete(b"alice", keyspace=savings)
    savings[b"alice"] = b"changed meanwhile"
    with pytest.raises(shale.ConflictError):
        txn.commit()
    assert savings[b"alice"] == b"changed meanwhile"
