"""shale.repair: a database whose CURRENT is lost is refused by open and rebuilt by repair."""

import os

import pytest

import shale


def test_repair_rebuilds_a_database_that_lost_current(db_path):
    with shale.open(db_path, write_buffer_size=64 * 1024) as db:
        for i in range(2000):
            db[f"key{i:05}".encode()] = f"value {i}".encode() * 5
        del db[b"key00007"]
    os.remove(os.path.join(db_path, "CURRENT"))
    with pytest.raises(shale.CorruptionError):
        shale.open(db_path)

    report = shale.repair(db_path)
    assert report["manifest_used"] is False
    assert report["entries_written"] == 1999
    assert report["problems"][0]["file"].endswith("CURRENT")
    assert report["indexes"] == {}
    with shale.open(db_path) as db:
        assert db[b"key01999"] == b"value 1999" * 5
        assert db.get(b"key00007") is None
        assert sum(1 for _ in db.range(None, None)) == 1999


def test_repair_refuses_an_open_database(db_path):
    with shale.open(db_path):
        with pytest.raises(shale.LockedError):
            shale.repair(db_path)
