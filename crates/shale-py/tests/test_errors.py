"""Engine errors arrive as subclasses of shale.Error."""

import pytest

import shale


def test_hierarchy():
    for cls in (shale.IoError, shale.CorruptionError, shale.InvalidArgumentError,
                shale.LockedError, shale.PoisonedError, shale.ClosedError,
                shale.EmbeddingError):
        assert issubclass(cls, shale.Error)
    assert issubclass(shale.InvalidArgumentError, ValueError)
    assert issubclass(shale.IoError, OSError)


def test_open_twice_is_locked(db_path):
    with shale.open(db_path):
        with pytest.raises(shale.LockedError) as info:
            shale.open(db_path)
        assert info.value.path is not None
    # Closing releases the lock at once.
    shale.open(db_path).close()


def test_invalid_option_values(db_path):
    with pytest.raises(shale.InvalidArgumentError) as info:
        shale.open(db_path, block_size=0, write_buffer_size=1)
    assert len(info.value.problems) >= 2
    with pytest.raises(ValueError):
        shale.open(db_path, compression="brotli")


def test_unknown_and_ill_typed_options_are_reported_together(db_path):
    with pytest.raises(shale.InvalidArgumentError) as info:
        shale.open(db_path, write_bufer_size=1, cache_size="big", mmap_reads=3)
    msg = str(info.value)
    assert "write_bufer_size" in msg and "cache_size" in msg and "mmap_reads" in msg
    assert len(info.value.problems) == 3


def test_binding_and_engine_option_problems_come_in_one_error(db_path):
    with pytest.raises(shale.InvalidArgumentError) as info:
        shale.open(db_path, write_bufer_size=1, block_size=0)
    problems = info.value.problems
    assert any("write_bufer_size" in p for p in problems), problems
    assert any("block_size" in p for p in problems), problems


def test_missing_database_without_create(tmp_path):
    with pytest.raises(shale.Error):
        shale.open(str(tmp_path / "absent"), create_if_missing=False)


def test_error_if_exists(db_path):
    shale.open(db_path).close()
    with pytest.raises(shale.Error):
        shale.open(db_path, error_if_exists=True)


def test_read_only_handles_beside_the_writer(db_path):
    writer = shale.open(db_path)
    writer[b"k"] = b"v"
    with shale.open(db_path, read_only=True) as reader:
        assert reader[b"k"] == b"v"
        with pytest.raises(shale.InvalidArgumentError):
            reader[b"k"] = b"w"
        writer[b"k"] = b"later"
        assert reader[b"k"] == b"v"  # as of its open
    writer.close()
    with pytest.raises(shale.Error):
        shale.open(db_path + "-absent", read_only=True)


def test_key_too_large_is_invalid_argument(db):
    with pytest.raises(shale.InvalidArgumentError):
        db[b"k" * (64 * 1024 + 1)] = b"v"


def test_search_without_semantic_is_invalid_argument(db):
    with pytest.raises(shale.InvalidArgumentError):
        db.search("anything")


def test_missing_model_is_embedding_error(db_path, tmp_path):
    with pytest.raises(shale.EmbeddingError) as info:
        shale.open(db_path, semantic=True, model_dir=str(tmp_path / "no-model"))
    assert "fetch-model" in str(info.value)


def test_corrupt_sst_raises_corruption_error_with_file_and_offset(db_path):
    import os

    with shale.open(db_path, compression="none", mmap_reads=False) as db:
        for i in range(2000):
            db[b"k%05d" % i] = b"v" * 50
        db.flush()
    ssts = [f for f in os.listdir(db_path) if f.endswith(".sst")]
    assert ssts
    path = os.path.join(db_path, ssts[0])
    with open(path, "r+b") as f:
        f.seek(100)  # inside the first data block
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(shale.CorruptionError) as info:
        with shale.open(db_path, mmap_reads=False) as db:
            list(db)
    assert info.value.file.endswith(ssts[0])
    assert isinstance(info.value.offset, int)
