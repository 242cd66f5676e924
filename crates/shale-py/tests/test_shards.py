"""shale.connect against a three-node cluster whose key space is split into three shards
(conftest.py's ``sharded``): requests reach the group of their keys' shard, a range
reads the shards in key order, a batch across shards is refused whole, a search reads
every shard its range overlaps, a shard splits, and a shard's replica moves to a new
node."""

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


def test_a_search_reads_every_shard(sharded_docs):
    c = sharded_docs
    c.define_index("docs", prefix=b"d/", model="hash", keywords="english")
    c[b"d/1"] = "the river in winter"
    c[b"d/5"] = "a river of stone"
    c[b"d/9"] = "river river river"
    c[b"d/6"] = "nothing here"
    hits = c.search("docs", "river", mode="keywords", k=5)
    # d/1 and d/5 tie (two terms each once stop words go): by key.
    assert [h.key for h in hits] == [b"d/9", b"d/1", b"d/5"]
    assert hits[0].text == "river river river"
    for mode in ["hybrid", "meaning"]:
        found = {h.key for h in c.search("docs", "river stone", mode=mode, k=4, exact=True)}
        assert {b"d/1", b"d/5", b"d/9"} <= found, mode
    ranged = c.search("docs", "river", mode="keywords", start=b"d/5", end=b"d/9")
    assert [h.key for h in ranged] == [b"d/5"]


def test_a_shard_splits_and_searches_answer_as_before(sharded_docs):
    c = sharded_docs
    c.define_index("docs", prefix=b"d/", model="hash", keywords="english")
    c[b"d/1"] = "the river in winter"
    c[b"d/9"] = "river river river"
    c[b"d/95"] = "a river bend"
    before = [(h.key, round(h.score, 5)) for h in c.search("docs", "river", mode="keywords")]
    kept, child = c.split(3, b"d/9", 4)
    assert (kept["group"], kept["start"], kept["end"]) == (3, b"d/8", b"d/9")
    assert (child["group"], child["start"], child["end"]) == (4, b"d/9", None)
    assert child["version"] == kept["version"]
    assert [s["group"] for s in c.shards()] == [1, 2, 3, 4]
    assert c[b"d/95"] == b"a river bend"
    c[b"z/1"] = b"after the split"
    assert c[b"z/1"] == b"after the split"
    after = [(h.key, round(h.score, 5)) for h in c.search("docs", "river", mode="keywords")]
    assert after == before
    with pytest.raises(shale.InvalidArgumentError):
        c.split(3, b"d/95", 5)  # no longer inside group 3's shard


def test_a_replica_moves_to_a_new_node(sharded, sharded_nodes):
    address = sharded_nodes.add(4)
    sharded[b"i/1"] = b"before"
    voters = sharded.move_replica(2, 3, 4, address)
    assert sorted(voters) == [1, 2, 4]
    sharded[b"i/2"] = b"after"
    assert (sharded[b"i/1"], sharded[b"i/2"]) == (b"before", b"after")
    with pytest.raises(shale.InvalidArgumentError):
        sharded.move_replica(2, 3, 4, address)  # node 3 is no voter of group 2 now
