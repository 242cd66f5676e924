"""The dict-like surface: item access, get, in, del, str keys, context manager, reopen."""

import pytest

import shale


def test_set_get_delete(db):
    db[b"k"] = b"v"
    assert db[b"k"] == b"v"
    assert db.get(b"k") == b"v"
    assert b"k" in db
    del db[b"k"]
    assert b"k" not in db
    assert db.get(b"k") is None


def test_missing_key_raises_key_error_with_the_key(db):
    with pytest.raises(KeyError) as info:
        db[b"nope"]
    assert info.value.args == (b"nope",)
    with pytest.raises(KeyError):
        del db[b"nope"]
    db.delete(b"nope")  # delete() of a missing key is fine, like dict.pop(k, None)


def test_get_default(db):
    assert db.get(b"missing", b"fallback") == b"fallback"
    assert db.get(b"missing", default=7) == 7


def test_str_and_bytearray_are_accepted_values_come_back_as_bytes(db):
    db["clé"] = "välue"
    assert db[b"cl\xc3\xa9"] == "välue".encode()
    assert db["clé"] == "välue".encode()
    db[bytearray(b"ba")] = bytearray(b"xy")
    assert db[b"ba"] == b"xy"
    assert isinstance(db[b"ba"], bytes)


def test_other_key_types_are_type_errors(db):
    with pytest.raises(TypeError):
        db[1] = b"v"
    with pytest.raises(TypeError):
        db[b"k"] = None


def test_empty_and_binary_values(db):
    db[b"\x00\xff"] = b""
    assert db[b"\x00\xff"] == b""
    assert b"\x00\xff" in db


def test_multi_get_answers_in_the_callers_order(db):
    for i in range(100):
        db[f"k{i:03}"] = f"v{i}"
    keys = [b"k050", "k007", b"missing", b"k050", bytearray(b"k099")]
    assert db.multi_get(keys) == [b"v50", b"v7", None, b"v50", b"v99"]
    assert db.multi_get(k for k in [b"k001"]) == [b"v1"]
    assert db.multi_get([]) == []
    with pytest.raises(TypeError):
        db.multi_get([b"k001", 5])


def test_checkpoint_is_a_copy_as_of_the_call(db, tmp_path):
    db[b"a"] = b"1"
    db.flush()
    db[b"b"] = b"2"
    copy = tmp_path / "copy"
    db.checkpoint(copy)
    db[b"a"] = b"changed"
    with shale.open(copy) as cp:
        assert dict(cp.items()) == {b"a": b"1", b"b": b"2"}
    with pytest.raises(shale.InvalidArgumentError):
        db.checkpoint(copy)


def test_put_and_delete_with_sync(db):
    db.put(b"a", b"1", sync=True)
    assert db[b"a"] == b"1"
    db.delete(b"a", sync=True)
    assert b"a" not in db


def test_context_manager_closes(db_path):
    with shale.open(db_path) as db:
        db[b"a"] = b"1"
    assert db.closed
    with pytest.raises(shale.ClosedError):
        db[b"a"]
    with pytest.raises(shale.ClosedError):
        db[b"a"] = b"2"
    db.close()  # idempotent


def test_reopen_keeps_data(db_path):
    db = shale.open(db_path)
    for i in range(1000):
        db[b"key%04d" % i] = b"value%d" % i
    db.flush()
    db[b"after-flush"] = b"in the wal"
    db.close()
    with shale.open(db_path) as db:
        assert db[b"key0000"] == b"value0"
        assert db[b"key0999"] == b"value999"
        assert db[b"after-flush"] == b"in the wal"
        assert len(list(db)) == 1001


def test_stats_flush_compact(db):
    for i in range(100):
        db[b"k%03d" % i] = b"v" * 100
    db.flush()
    db.compact()
    stats = db.stats()
    assert stats["writes"] >= 100
    assert stats["flushes"] >= 1
    assert isinstance(stats["level_files"], list)
    assert sum(stats["level_files"]) >= 1
    assert stats["sst_bytes"] > 0
    assert "index_applied" not in stats


def test_options_are_applied(db_path):
    with shale.open(db_path, write_buffer_size=1 << 20, cache_size=1 << 20,
                    compression="zstd") as db:
        for i in range(200):
            db[b"k%03d" % i] = b"x" * 1000
        db.flush()
        assert db.stats()["block_cache_capacity_bytes"] == 1 << 20
    for name in ("none", "snappy", "lz4", "zstd:9"):
        with shale.open(db_path, compression=name) as db:
            assert db[b"k000"] == b"x" * 1000
    with shale.open(db_path, bottommost_compression="zstd:19") as db:
        db.compact()
        assert db[b"k199"] == b"x" * 1000
    for bad in ("zstd:0", "gzip"):
        with pytest.raises(ValueError, match="bottommost_compression"):
            shale.open(db_path, bottommost_compression=bad)
    with shale.open(db_path, compression_per_level=["none", "lz4", "zstd:1"]) as db:
        db[b"k200"] = b"y"
        db.flush()
        db.compact()
        assert db[b"k199"] == b"x" * 1000
    for bad in (["lz4"] * 8, ["gzip"], ["zstd:23"], "lz4"):
        with pytest.raises(ValueError, match="compression_per_level"):
            shale.open(db_path, compression_per_level=bad)


def test_repr(db):
    assert repr(db).startswith("<shale.DB ")
    db.close()
    assert "closed" in repr(db)


def test_ttl_database_hides_expired_values(tmp_path):
    import time

    path = tmp_path / "ttl"
    with shale.open_ttl(path) as db:
        db.put(b"forever", b"a")
        db.put(b"brief", b"b", ttl=0.05)
        assert db.get(b"brief") == b"b"
        time.sleep(0.1)
        assert db.get(b"brief") is None
        assert db.get(b"brief", b"gone") == b"gone"
        assert db.range() == [(b"forever", b"a")]
        with pytest.raises(shale.InvalidArgumentError):
            db.put(b"k", b"v", ttl=-1)
    with pytest.raises(shale.InvalidArgumentError):
        shale.open_ttl(tmp_path / "plain-then-ttl", semantic=True)
    shale.open(tmp_path / "plain").close()
    with pytest.raises(shale.InvalidArgumentError):
        shale.open_ttl(tmp_path / "plain")
