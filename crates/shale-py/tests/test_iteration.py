"""Iteration: order, reverse, range bounds, prefixes, iterators that outlive changes."""

import pytest

import shale

KEYS = [b"a", b"ab", b"abc", b"b", b"ba", b"c", b"\xff", b"\xff\xff"]


@pytest.fixture
def filled(db):
    for k in reversed(KEYS):
        db[k] = k.upper()
    return db


def test_iter_yields_pairs_in_key_order(filled):
    assert list(filled) == [(k, k.upper()) for k in KEYS]
    assert list(filled.items()) == [(k, k.upper()) for k in KEYS]
    assert list(filled.keys()) == KEYS
    assert list(filled.values()) == [k.upper() for k in KEYS]


def test_range_is_start_inclusive_end_exclusive(filled):
    assert [k for k, _ in filled.range(b"ab", b"b")] == [b"ab", b"abc"]
    assert [k for k, _ in filled.range(start=b"b")] == [b"b", b"ba", b"c", b"\xff", b"\xff\xff"]
    assert [k for k, _ in filled.range(end=b"ab")] == [b"a"]
    assert [k for k, _ in filled.range(b"zz", b"a")] == []
    assert list(filled.range()) == list(filled)


def test_reverse(filled):
    assert [k for k, _ in filled.range(reverse=True)] == KEYS[::-1]
    assert [k for k, _ in filled.range(b"ab", b"ba", reverse=True)] == [b"b", b"abc", b"ab"]


def test_prefix(filled):
    assert [k for k, _ in filled.prefix(b"a")] == [b"a", b"ab", b"abc"]
    assert [k for k, _ in filled.prefix("ab")] == [b"ab", b"abc"]
    assert [k for k, _ in filled.prefix(b"a", reverse=True)] == [b"abc", b"ab", b"a"]
    # A prefix of 0xff bytes has no successor: the range runs to the end.
    assert [k for k, _ in filled.prefix(b"\xff")] == [b"\xff", b"\xff\xff"]
    assert list(filled.prefix(b"zzz")) == []


def test_deleted_keys_are_skipped(filled):
    del filled[b"ab"]
    assert b"ab" not in [k for k, _ in filled]


def test_iterator_sees_state_at_creation(filled):
    it = filled.range()
    filled[b"aa"] = b"new"
    del filled[b"c"]
    keys = [k for k, _ in it]
    assert keys == KEYS
    assert b"aa" in [k for k, _ in filled]


def test_iteration_across_flushed_files(db):
    for i in range(0, 3000, 2):
        db[b"%05d" % i] = b"even"
    db.flush()
    for i in range(1, 3000, 2):
        db[b"%05d" % i] = b"odd"
    keys = [k for k, _ in db]
    assert keys == [b"%05d" % i for i in range(3000)]
    assert next(iter(db.range(reverse=True)))[0] == b"02999"


def test_exhausted_iterator_stays_exhausted(filled):
    it = filled.prefix(b"c")
    assert next(it) == (b"c", b"C")
    with pytest.raises(StopIteration):
        next(it)
    with pytest.raises(StopIteration):
        next(it)


def test_iterator_after_close_raises_closed(filled):
    it = iter(filled)
    next(it)
    filled.close()
    with pytest.raises(shale.ClosedError):
        next(it)


def test_reopen_while_an_iterator_of_the_closed_db_lives(db_path):
    db = shale.open(db_path)
    db[b"a"] = b"1"
    it = iter(db)
    snap = db.snapshot()
    db.close()
    with shale.open(db_path) as again:
        assert again[b"a"] == b"1"
    with pytest.raises(shale.ClosedError):
        next(it)
    with pytest.raises(shale.ClosedError):
        snap.get(b"a")


def test_cursor_seeks_and_moves_both_ways(db):
    for k in [b"a", b"c", b"e", b"g"]:
        db[k] = k.upper()
    cur = db.cursor()
    assert not cur.valid
    with pytest.raises(shale.InvalidArgumentError):
        cur.key
    cur.seek(b"b")
    assert (cur.key, cur.value) == (b"c", b"C")
    cur.next()
    assert cur.key == b"e"
    cur.prev()
    cur.prev()
    assert cur.key == b"a"
    cur.prev()
    assert not cur.valid
    cur.seek_for_prev(b"f")
    assert cur.key == b"e"
    cur.seek_to_last()
    assert cur.key == b"g"
    bounded = db.cursor(start=b"b", end=b"f")
    bounded.seek_to_first()
    seen = []
    while bounded.valid:
        seen.append(bounded.key)
        bounded.next()
    assert seen == [b"c", b"e"]


def test_snapshot_cursor_reads_the_snapshot(db):
    db[b"k"] = b"old"
    with db.snapshot() as snap:
        db[b"k"] = b"new"
        cur = snap.cursor()
        cur.seek_to_first()
        assert cur.value == b"old"
