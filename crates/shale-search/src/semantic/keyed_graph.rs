//! The semantic index's in-memory state: the HNSW graph, which key each node holds, and
//! what the index knows about each key (the sequence number of the change it reflects), so
//! that changes applied out of order by two workers end in the newest state.
//!
//! Deleted keys: the key map remembers a deleted key's sequence number, so that an older
//! change of the key that two workers apply out of order cannot revive it. It forgets the
//! key once the **horizon** (`pending.rs`: the least sequence number still to be applied)
//! has passed the delete. A range delete deletes the keys of its range the map holds and
//! is remembered itself, as a range and a sequence number, until the horizon passes it:
//! an older change of a key in the range that a worker applies later is stale, whether
//! or not the map held the key when the range was deleted.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use super::SearchOptions;
use crate::vector::{Hnsw, HnswParams, NodeId};
use shale::error::{Error, Result};

/// What the index knows about a key.
#[derive(Debug, Clone, Copy)]
pub(super) struct KeyState {
    /// Sequence number of the write this state reflects; older changes are ignored.
    pub(super) seq: u64,
    /// The node holding its vector; `None` after a delete.
    pub(super) node: Option<u32>,
}

/// The graph, the key of each of its nodes, and the key map.
///
/// Node ids are reused, so that the id space (and with it `nodes`, the graph's node store
/// and each search's visited marks) stays near the number of live values however many
/// overwrites come: an id becomes **free** when a graph rebuild has left its dead node
/// out, and [`KeyedGraph::apply`] hands free ids out before new ones. An id handed out but not
/// yet inserted into the graph (**pending**) is never freed, since its inserter is about
/// to use it.
pub(super) struct KeyedGraph {
    /// Holds the vectors; exact search scans it, approximate search walks it.
    pub(super) graph: Hnsw,
    /// Per node id: its key, the hash of its text, and its state.
    pub(super) nodes: Vec<Node>,
    /// Per node id: eight bytes of its key after the index's prefix ([`key_word`]), apart
    /// from `nodes` so that a key range's check during a graph walk reads one dense array
    /// (800 KB for 100,000 nodes) and touches a key only when the words tie.
    words: Vec<u64>,
    pub(super) live: usize,
    /// In key order, so that a search over a key range can walk just that range.
    pub(super) keys: BTreeMap<Vec<u8>, KeyState>,
    /// Free ids, taken from the end.
    free: Vec<u32>,
    /// The deletes whose key states `keys` still holds, by sequence number.
    deleted: BTreeSet<(u64, Vec<u8>)>,
    /// The range deletes the horizon has not passed: start, end, sequence number.
    ranges: Vec<(Vec<u8>, Vec<u8>, u64)>,
    /// The length of the index's prefix, which every key has.
    prefix_len: usize,
}

/// Eight bytes of `key` from `prefix_len` on, big-endian, zero-padded: two keys whose words
/// differ order as their words do; equal words say nothing.
pub(super) fn key_word(key: &[u8], prefix_len: usize) -> u64 {
    let mut word = [0u8; 8];
    for (w, b) in word.iter_mut().zip(key.iter().skip(prefix_len)) {
        *w = *b;
    }
    u64::from_be_bytes(word)
}

/// A search's key bounds as the graph's filter checks them: with the words of the bounds
/// (after the prefix) compared first, the whole keys only when the words tie.
pub(super) struct KeyRange {
    lower: Option<(u64, Vec<u8>)>,
    upper: Option<(u64, Vec<u8>)>,
}

impl KeyRange {
    /// The keys under `prefix` within `opts`' bounds, or `None` if there are none.
    pub(super) fn new(prefix: &[u8], opts: &SearchOptions) -> Option<KeyRange> {
        let n = prefix.len();
        // Every key of the index is in [prefix, successor of prefix).
        let lower = match &opts.lower_bound {
            Some(b) if b.as_slice() > prefix => {
                if !b.starts_with(prefix) {
                    return None; // past every key of the index
                }
                Some((key_word(b, n), b.clone()))
            }
            _ => None,
        };
        let upper = match &opts.upper_bound {
            Some(b) if b.as_slice() <= prefix => return None,
            Some(b) if b.starts_with(prefix) => Some((key_word(b, n), b.clone())),
            _ => None, // at or past the successor: bounds nothing
        };
        if let (Some((_, lo)), Some((_, hi))) = (&lower, &upper) {
            if lo >= hi {
                return None;
            }
        }
        Some(KeyRange { lower, upper })
    }

    /// True if the range bounds nothing (every key of the index is in it).
    pub(super) fn is_everything(&self) -> bool {
        self.lower.is_none() && self.upper.is_none()
    }

    /// True if the key whose word is `word` is in the range; `key` gives the whole key,
    /// asked for only when the word ties with a bound's.
    #[inline]
    pub(super) fn admits<'k>(&self, word: u64, key: impl Fn() -> &'k [u8]) -> bool {
        use std::cmp::Ordering::{Equal, Greater, Less};
        let above = self.lower.as_ref().is_none_or(|(w, lo)| match word.cmp(w) {
            Greater => true,
            Less => false,
            Equal => key() >= lo.as_slice(),
        });
        above
            && self.upper.as_ref().is_none_or(|(w, hi)| match word.cmp(w) {
                Less => true,
                Greater => false,
                Equal => key() < hi.as_slice(),
            })
    }
}

#[derive(Debug)]
pub(super) struct Node {
    /// The key while the node is live; empty once it is dead.
    pub(super) key: Vec<u8>,
    pub(super) value_hash: u64,
    pub(super) state: NodeState,
    /// Handed out by `apply`, not yet inserted into the graph (see [`KeyedGraph::inserted`]).
    pub(super) pending: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NodeState {
    /// Holds its key's current vector.
    Live,
    /// Replaced or deleted; its graph node (if inserted) is a tombstone.
    Dead,
    /// Not in the graph; [`KeyedGraph::apply`] may hand the id out again.
    Free,
}

impl Node {
    /// A dead node: the state of an id a checkpoint holds that no value claims.
    pub(super) fn dead() -> Node {
        Node {
            key: Vec::new(),
            value_hash: 0,
            state: NodeState::Dead,
            pending: false,
        }
    }

    pub(super) fn is_live(&self) -> bool {
        self.state == NodeState::Live
    }
}

/// What [`KeyedGraph::apply`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Applied {
    /// An older change than the index has: nothing done.
    Stale,
    /// The key's old node (if any) is dead and the key has none.
    Deleted,
    /// The key's vector goes under this node id (the caller inserts it, then reports it
    /// to [`KeyedGraph::inserted`]).
    Put(u32),
}

impl KeyedGraph {
    /// An empty index whose keys all start with a prefix of `prefix_len` bytes.
    pub(super) fn new(dim: usize, params: HnswParams, prefix_len: usize) -> Result<KeyedGraph> {
        Ok(KeyedGraph::with_graph(Hnsw::new(dim, params)?, prefix_len))
    }

    /// An index around `graph` (a checkpoint's) whose nodes and keys are still to be laid
    /// out.
    pub(super) fn with_graph(graph: Hnsw, prefix_len: usize) -> KeyedGraph {
        KeyedGraph {
            graph,
            nodes: Vec::new(),
            words: Vec::new(),
            live: 0,
            keys: BTreeMap::new(),
            free: Vec::new(),
            deleted: BTreeSet::new(),
            ranges: Vec::new(),
            prefix_len,
        }
    }

    /// Record `key`'s new state (`value_hash` for a put, `None` for a delete) if `seq` is
    /// not older than what the index holds.
    pub(super) fn apply(
        &mut self,
        key: &[u8],
        seq: u64,
        value_hash: Option<u64>,
    ) -> Result<Applied> {
        let in_later_range = |(start, end, at): &(Vec<u8>, Vec<u8>, u64)| {
            *at > seq && key >= start.as_slice() && key < end.as_slice()
        };
        if self.ranges.iter().any(in_later_range) {
            return Ok(Applied::Stale);
        }
        if let Some(old) = self.keys.get(key) {
            if old.seq > seq {
                return Ok(Applied::Stale);
            }
            if let Some(id) = old.node {
                self.kill(id);
            }
        }
        let node = match value_hash {
            Some(value_hash) => Some(self.push(key, value_hash)?),
            None => {
                self.deleted.insert((seq, key.to_vec()));
                None
            }
        };
        self.keys.insert(key.to_vec(), KeyState { seq, node });
        Ok(node.map_or(Applied::Deleted, Applied::Put))
    }

    /// Delete every key in `[start, end)` whose state is older than `seq`, and remember
    /// the range until the horizon passes `seq`. Returns the keys whose vectors it
    /// deleted.
    pub(super) fn apply_range_delete(
        &mut self,
        start: &[u8],
        end: &[u8],
        seq: u64,
    ) -> Result<Vec<Vec<u8>>> {
        if start >= end {
            return Ok(Vec::new());
        }
        let older: Vec<Vec<u8>> = self
            .keys
            .range::<[u8], _>((Bound::Included(start), Bound::Excluded(end)))
            .filter(|(_, state)| state.seq < seq && state.node.is_some())
            .map(|(key, _)| key.clone())
            .collect();
        for key in &older {
            self.apply(key, seq, None)?;
        }
        self.ranges.push((start.to_vec(), end.to_vec(), seq));
        Ok(older)
    }

    /// Forget the deleted keys whose deletes are older than `horizon`: no change older
    /// than it can still be applied (see the module comment of `semantic/mod.rs`), so no
    /// stale change can need their sequence numbers any more.
    pub(super) fn forget_deleted_before(&mut self, horizon: u64) {
        self.ranges.retain(|(_, _, seq)| *seq >= horizon);
        while let Some((seq, key)) = self.deleted.pop_first() {
            if seq >= horizon {
                self.deleted.insert((seq, key));
                break;
            }
            // Unless a later change of the key replaced this state.
            if self
                .keys
                .get(&key)
                .is_some_and(|k| k.seq == seq && k.node.is_none())
            {
                self.keys.remove(&key);
            }
        }
    }

    /// A live, pending node for `key`: a free id if there is one, else a new one.
    fn push(&mut self, key: &[u8], value_hash: u64) -> Result<u32> {
        let node = Node {
            key: key.to_vec(),
            value_hash,
            state: NodeState::Live,
            pending: true,
        };
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                let id = u32::try_from(self.nodes.len())
                    .ok()
                    .filter(|&id| id < u32::MAX)
                    .ok_or_else(|| Error::invalid("the semantic index is full (2^32 - 1 nodes)"))?;
                self.nodes.push(Node::dead());
                self.words.push(0);
                id
            }
        };
        self.set_node(id, node);
        self.live += 1;
        Ok(id)
    }

    /// Make node `id` dead, here and (if it is there yet) in the graph.
    pub(super) fn kill(&mut self, id: u32) {
        let Some(node) = self.nodes.get_mut(id as usize).filter(|n| n.is_live()) else {
            // Already dead or free: its id may hold another key's node by now.
            return;
        };
        node.state = NodeState::Dead;
        node.key = Vec::new();
        self.live -= 1;
        // A node whose insert has not happened yet is tombstoned by its inserter, which
        // checks liveness after inserting (see `Semantic::insert_vectors`).
        let _ = self.graph.mark_deleted(NodeId(id));
    }

    /// The graph now holds `ids` (handed out by `apply`): they are no longer pending.
    pub(super) fn inserted(&mut self, ids: impl IntoIterator<Item = u32>) {
        for id in ids {
            if let Some(node) = self.nodes.get_mut(id as usize) {
                node.pending = false;
            }
        }
    }

    /// If tombstones fill too much of the graph, rebuild it without them and free the
    /// ids of the dead nodes it left out.
    pub(super) fn reclaim(&mut self, threads: usize) -> Result<()> {
        if !self.graph.needs_reclaim() {
            return Ok(());
        }
        self.graph = self.graph.rebuilt(threads)?;
        self.free_absent();
        Ok(())
    }

    /// Free the ids of dead nodes the graph does not hold: after a rebuild, every dead node
    /// that is not pending (it was inserted, then tombstoned by `kill` or its inserter);
    /// after an open, also the ids a checkpoint had freed.
    pub(super) fn free_absent(&mut self) {
        for (id, node) in (0u32..).zip(self.nodes.iter_mut()) {
            if node.state == NodeState::Dead && !node.pending && !self.graph.contains(NodeId(id)) {
                node.state = NodeState::Free;
                self.free.push(id);
            }
        }
        // Lowest ids first (`pop` takes from the end), so the id space stays compact.
        self.free.sort_unstable_by(|a, b| b.cmp(a));
    }

    /// True if node `id`'s key is in `range` (a dead node's too: the graph's tombstones
    /// keep dead nodes out of results, and the caller checks every hit against the data).
    #[inline]
    pub(super) fn admits(&self, id: NodeId, range: &KeyRange) -> bool {
        let Some(&word) = self.words.get(id.0 as usize) else {
            return false;
        };
        range.admits(word, || {
            self.nodes
                .get(id.0 as usize)
                .map_or(&[][..], |n| n.key.as_slice())
        })
    }

    /// The share of the live nodes whose keys are in `range`, estimated from up to 512
    /// ids spread evenly over the id space (every id of a small index): what chooses
    /// between scanning a range and walking the graph, without walking the range.
    pub(super) fn range_share(&self, range: &KeyRange) -> f64 {
        const SAMPLE: usize = 512;
        let step = self.nodes.len().div_ceil(SAMPLE).max(1);
        let (mut live, mut inside) = (0u32, 0u32);
        for id in (0..self.nodes.len()).step_by(step) {
            if self.nodes.get(id).is_some_and(Node::is_live) {
                live += 1;
                let id = NodeId(u32::try_from(id).unwrap_or(u32::MAX));
                inside += u32::from(self.admits(id, range));
            }
        }
        if live == 0 {
            0.0
        } else {
            f64::from(inside) / f64::from(live)
        }
    }

    /// The word of `key` in this index ([`key_word`]).
    pub(super) fn word(&self, key: &[u8]) -> u64 {
        key_word(key, self.prefix_len)
    }

    /// Node `id` is `node` now (the id is below `id_space`).
    pub(super) fn set_node(&mut self, id: u32, node: Node) {
        let word = key_word(&node.key, self.prefix_len);
        if let (Some(slot), Some(w)) = (
            self.nodes.get_mut(id as usize),
            self.words.get_mut(id as usize),
        ) {
            debug_assert!(slot.state != NodeState::Live && !slot.pending);
            *slot = node;
            *w = word;
        }
    }

    /// Lay out ids `0..n` as dead nodes (the ids of a checkpoint before its live nodes are
    /// claimed).
    pub(super) fn reset_nodes(&mut self, n: usize) {
        self.nodes = (0..n).map(|_| Node::dead()).collect();
        self.words = vec![0; n];
    }

    /// The live keys in `opts`' bounds and their nodes, in key order.
    pub(super) fn live_in<'a>(
        &'a self,
        opts: &'a SearchOptions,
    ) -> impl Iterator<Item = (&'a [u8], u32)> + 'a {
        use std::ops::Bound;
        let (lo, hi) = (opts.lower_bound.as_deref(), opts.upper_bound.as_deref());
        // `BTreeMap::range` panics on an inverted range; such a range holds nothing.
        let empty = lo.zip(hi).is_some_and(|(lo, hi)| lo >= hi);
        let bounds: (Bound<&[u8]>, Bound<&[u8]>) = (
            lo.map_or(Bound::Unbounded, Bound::Included),
            hi.map_or(Bound::Unbounded, Bound::Excluded),
        );
        (!empty)
            .then(|| self.keys.range::<[u8], _>(bounds))
            .into_iter()
            .flatten()
            .filter_map(|(key, state)| Some((key.as_slice(), state.node?)))
    }

    pub(super) fn is_live(&self, id: u32) -> bool {
        self.nodes.get(id as usize).is_some_and(Node::is_live)
    }

    /// One more than the highest id ever handed out: what `nodes`, the graph's node store
    /// and the visited marks of a search scale with.
    pub(super) fn id_space(&self) -> usize {
        self.nodes.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The range's word-first check agrees with comparing whole keys, for keys and bounds
    /// around the prefix, of every length up to past the word.
    #[test]
    fn key_ranges_agree_with_whole_key_comparison() {
        let prefix = b"p/";
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for tail in [
            &b""[..],
            b"\0",
            b"a",
            b"a\0",
            b"ab",
            b"abcdefgh",
            b"abcdefgh\0",
            b"abcdefghi",
            b"abcdefgi",
            b"b",
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff",
        ] {
            keys.push([&prefix[..], tail].concat());
        }
        let mut bounds: Vec<Option<Vec<u8>>> = keys.iter().cloned().map(Some).collect();
        bounds.extend([
            None,
            Some(b"a".to_vec()),
            Some(b"p".to_vec()),
            Some(b"q".to_vec()),
        ]);

        for lo in &bounds {
            for hi in &bounds {
                let opts = SearchOptions {
                    lower_bound: lo.clone(),
                    upper_bound: hi.clone(),
                    ..SearchOptions::k(1)
                };
                let range = KeyRange::new(prefix, &opts);
                for key in &keys {
                    let want = lo.as_ref().is_none_or(|lo| key >= lo)
                        && hi.as_ref().is_none_or(|hi| key < hi);
                    let word = key_word(key, prefix.len());
                    let got = range.as_ref().is_some_and(|r| r.admits(word, || key));
                    assert_eq!(got, want, "{key:?} in [{lo:?}, {hi:?})");
                }
            }
        }
    }

    #[test]
    fn stale_changes_are_ignored() {
        let mut index = KeyedGraph::new(2, HnswParams::with_m(4), 0).unwrap();
        assert_eq!(index.apply(b"k", 5, Some(1)).unwrap(), Applied::Put(0));
        assert_eq!(
            index.apply(b"k", 4, None).unwrap(),
            Applied::Stale,
            "an older delete must not win"
        );
        assert_eq!(index.live, 1);
        assert_eq!(index.apply(b"k", 6, None).unwrap(), Applied::Deleted);
        assert_eq!(index.live, 0);
        assert_eq!(index.apply(b"k", 5, Some(1)).unwrap(), Applied::Stale);
        assert_eq!(index.live, 0);
    }

    #[test]
    fn a_range_delete_deletes_older_states_and_outlives_them_to_the_horizon() {
        let mut index = KeyedGraph::new(2, HnswParams::with_m(4), 0).unwrap();
        index.apply(b"a", 1, Some(1)).unwrap();
        index.apply(b"b", 2, Some(1)).unwrap();
        index.apply(b"d", 12, Some(1)).unwrap(); // newer than the range delete
        index.apply(b"e", 3, Some(1)).unwrap(); // past its end
        let deleted = index.apply_range_delete(b"a", b"e", 10).unwrap();
        assert_eq!(deleted, [b"a".to_vec(), b"b".to_vec()]);
        assert_eq!(index.live, 2, "d (newer) and e (outside) stay");
        // A put of a key the map never held, older than the range delete and applied
        // after it by another worker, is stale; a newer one is not.
        assert_eq!(index.apply(b"c", 7, Some(1)).unwrap(), Applied::Stale);
        assert_eq!(index.apply(b"b", 9, Some(1)).unwrap(), Applied::Stale);
        assert_eq!(index.apply(b"c", 11, Some(1)).unwrap(), Applied::Put(4));
        // Forgotten once the horizon passes it, with the keys' own tombstones.
        index.forget_deleted_before(10);
        assert_eq!(index.apply(b"b", 9, Some(1)).unwrap(), Applied::Stale);
        index.forget_deleted_before(11);
        assert!(index.ranges.is_empty() && !index.keys.contains_key(&b"a"[..]));
        assert_eq!(index.apply_range_delete(b"z", b"a", 20).unwrap().len(), 0);
    }

    /// Insert the vector of `id` as its inserter does (then tombstone it if it died).
    fn insert(index: &mut KeyedGraph, id: u32, x: f32) {
        index.graph.insert(NodeId(id), &[x, 1.0]).unwrap();
        if !index.is_live(id) {
            index.graph.mark_deleted(NodeId(id)).unwrap();
        }
        index.inserted([id]);
    }

    #[test]
    fn deleted_keys_are_forgotten_below_the_horizon_only() {
        let mut index = KeyedGraph::new(2, HnswParams::with_m(4), 0).unwrap();
        index.apply(b"a", 1, Some(1)).unwrap();
        assert_eq!(index.apply(b"a", 5, None).unwrap(), Applied::Deleted);
        assert_eq!(index.apply(b"b", 6, None).unwrap(), Applied::Deleted);
        assert_eq!(index.apply(b"c", 7, None).unwrap(), Applied::Deleted);
        assert_eq!(index.apply(b"c", 8, Some(2)).unwrap(), Applied::Put(1));
        index.forget_deleted_before(6);
        // A change of `a` older than its delete could not come any more: forgotten.
        assert!(!index.keys.contains_key(&b"a"[..]));
        assert_eq!(
            index.apply(b"b", 5, Some(3)).unwrap(),
            Applied::Stale,
            "6 is kept"
        );
        index.forget_deleted_before(u64::MAX);
        assert!(!index.keys.contains_key(&b"b"[..]));
        // `c` was put again after its delete: its state stays.
        assert_eq!(index.keys[&b"c"[..]].node, Some(1));
        assert_eq!(index.keys.len(), 1);
    }

    #[test]
    fn ids_are_reused_after_a_rebuild_but_never_while_pending() {
        let mut index = KeyedGraph::new(2, HnswParams::with_m(4), 0).unwrap();
        for (i, key) in [b"a", b"b", b"c", b"d"].iter().enumerate() {
            assert_eq!(
                index.apply(*key, 1, Some(1)).unwrap(),
                Applied::Put(i as u32)
            );
            insert(&mut index, i as u32, i as f32);
        }
        // `a` is replaced and its new node inserted; `b` is replaced twice before either of
        // its new nodes is inserted, so one of those is dead and still pending.
        assert_eq!(index.apply(b"a", 2, Some(2)).unwrap(), Applied::Put(4));
        insert(&mut index, 4, 4.0);
        assert_eq!(index.apply(b"b", 2, Some(2)).unwrap(), Applied::Put(5));
        assert_eq!(index.apply(b"b", 3, Some(3)).unwrap(), Applied::Put(6));
        assert!(index.graph.needs_reclaim());
        index.reclaim(1).unwrap();
        // Ids 0 and 1 (dead, inserted) are free; 5 (dead, pending) is not.
        assert_eq!(index.graph.len(), 3, "the rebuild keeps live nodes only");
        assert_eq!(index.apply(b"e", 1, Some(1)).unwrap(), Applied::Put(0));
        assert_eq!(index.apply(b"f", 1, Some(1)).unwrap(), Applied::Put(1));
        assert_eq!(index.apply(b"g", 1, Some(1)).unwrap(), Applied::Put(7));
        // The late inserts of 5 and 6 still find their slots empty.
        insert(&mut index, 5, 5.0);
        insert(&mut index, 6, 6.0);
        for (id, x) in [(0, 10.0), (1, 11.0), (7, 12.0)] {
            insert(&mut index, id, x);
        }
        assert!(index.graph.is_deleted(NodeId(5)));
        assert_eq!(index.live, 7);
        assert_eq!(index.id_space(), 8);
        let keys: Vec<&[u8]> = (0..8)
            .filter(|&id| index.is_live(id))
            .map(|id| &index.nodes[id as usize].key[..])
            .collect();
        assert_eq!(keys, [&b"e"[..], b"f", b"c", b"d", b"a", b"b", b"g"]);
    }
}
