"""shale.connect against a three-node cluster whose key space is split into three shards
(conftest.py's ``sharded``): requests reach the group of their keys' shard, a range
reads the shards in key order, and a batch across shards is refused whole."""

import pytest

import shale


def test_each_key_reaches_its_shard(sharded):
    shards = sharded.shards()
    assert [(s["group"], s["start"], s["end"]) for s in shards] == [
        (1, b"", b"h"), (2, b"h", b"p"), (3, b"p", None)]
    assert all(s["leader_address"] for s in shards)
    keys = [f"{p}{i}".encode() for p in "ahmpz" for i in range(3)]
    for k in keys:
        sharded[k] = k
    assert [sharded[k] for k in keys] == keys
    in_range = [k for k, _ in sharded.range(b"a", b"zz") if k != b"ready"]
    assert in_range == sorted(keys)


def test_a_batch_across_shards_is_refused_whole(sharded):
    with pytest.raises(shale.CrossShardError) as refused:
        with sharded.batch() as b:
            b.put(b"b/1", b"1")
            b.put(b"q/1", b"1")
    assert isinstance(refused.value, shale.ClusterError)
    assert sharded.get(b"b/1") is None and sharded.get(b"q/1") is None
    with sharded.batch() as b:
        b.put(b"q/1", b"1")
        b.put(b"r/1", b"2")
    assert sharded.get(b"r/1") == b"2"
