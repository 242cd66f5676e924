"""A Python compaction filter: keep, remove or change each key's newest value."""

import sys

import pytest

import shale


def test_a_filter_keeps_removes_and_changes(db_path):
    seen = []

    def expire(level, key, value):
        seen.append(level)
        if key.startswith(b"tmp/"):
            return False
        if key.startswith(b"up/"):
            return value.upper()
        return True

    with shale.open(db_path, compaction_filter=expire) as db:
        for i in range(100):
            db[b"tmp/%03d" % i] = b"x"
            db[b"up/%03d" % i] = b"quiet"
            db[b"keep/%03d" % i] = b"as is"
        db.compact()
        assert list(db.prefix(b"tmp/")) == []
        assert db[b"up/007"] == b"QUIET"
        assert db[b"keep/007"] == b"as is"
        assert seen and all(isinstance(level, int) for level in seen)
        # A keyspace is not filtered: the filter is the default keyspace's.
        ks = db.keyspace("other")
        ks[b"tmp/1"] = b"stays"
        ks.compact()
        assert ks[b"tmp/1"] == b"stays"


def test_a_failing_filter_keeps_the_value_and_reports(db_path, monkeypatch):
    reported = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: reported.append(u.exc_value))

    def forgot_to_return(level, key, value):
        if key == b"boom":
            raise RuntimeError("filter bug")

    with shale.open(db_path, compaction_filter=forgot_to_return) as db:
        db[b"a"] = b"1"
        db[b"boom"] = b"2"
        db.compact()
        assert db[b"a"] == b"1"
        assert db[b"boom"] == b"2"
    kinds = {type(e) for e in reported}
    assert kinds == {TypeError, RuntimeError}, reported


def test_a_filter_must_be_callable(db_path):
    with pytest.raises(shale.InvalidArgumentError):
        shale.open(db_path, compaction_filter=42)


def test_each_keyspace_has_its_own_filter(db_path):
    def drop(prefix):
        return lambda level, key, value: not key.startswith(prefix)

    with shale.open(
        db_path,
        compaction_filter=drop(b"a"),
        keyspace_compaction_filters={"log": drop(b"b")},
    ) as db:
        log = db.keyspace("log")
        for k in (b"a1", b"b1", b"c1"):
            db[k] = b"v"
            log[k] = b"v"
        db.compact()
        log.compact()
        assert list(db.keys()) == [b"b1", b"c1"]
        assert list(log.keys()) == [b"a1", b"c1"]
    with pytest.raises(shale.InvalidArgumentError):
        shale.open(db_path, keyspace_compaction_filters={"log": 1})
