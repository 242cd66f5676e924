//! The semantic index's in-memory state: the HNSW graph, which key each node holds, and
//! what the index knows about each key (the sequence number of the change it reflects), so
//! that changes applied out of order by two workers end in the newest state.

use std::collections::HashMap;

use super::{Hnsw, HnswParams, NodeId, SearchOptions};
use crate::error::{Error, Result};

/// What the index knows about a key.
#[derive(Debug, Clone, Copy)]
pub(super) struct KeyState {
    /// Sequence number of the write this state reflects; older changes are ignored.
    pub(super) seq: u64,
    /// The node holding its vector; `None` after a delete.
    pub(super) node: Option<u32>,
}

/// The graph, the key of each of its nodes, and the key map.
pub(super) struct Index {
    /// Holds the vectors; exact search scans it, approximate search walks it.
    pub(super) graph: Hnsw,
    /// Per node id: its key, the hash of its text, and whether it is live. Ids are never
    /// reused while the process runs; a node replaced or deleted stays (dead) until the
    /// graph is rebuilt.
    pub(super) nodes: Vec<Node>,
    pub(super) live: usize,
    pub(super) keys: HashMap<Vec<u8>, KeyState>,
}

#[derive(Debug)]
pub(super) struct Node {
    pub(super) key: Vec<u8>,
    pub(super) text_hash: u64,
    pub(super) live: bool,
}

/// What [`Index::apply`] decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Applied {
    /// An older change than the index has: nothing done.
    Stale,
    /// The key's old node (if any) is dead and the key has none.
    Deleted,
    /// The key's vector goes under this new node id (the caller inserts it).
    Put(u32),
}

impl Index {
    pub(super) fn new(dim: usize, params: HnswParams) -> Result<Index> {
        Ok(Index {
            graph: Hnsw::new(dim, params)?,
            nodes: Vec::new(),
            live: 0,
            keys: HashMap::new(),
        })
    }

    /// Record `key`'s new state (`text_hash` for a put, `None` for a delete) if `seq` is
    /// not older than what the index holds.
    pub(super) fn apply(
        &mut self,
        key: &[u8],
        seq: u64,
        text_hash: Option<u64>,
    ) -> Result<Applied> {
        if let Some(old) = self.keys.get(key) {
            if old.seq > seq {
                return Ok(Applied::Stale);
            }
            if let Some(id) = old.node {
                self.kill(id);
            }
        }
        let node = match text_hash {
            Some(text_hash) => Some(self.push(key, text_hash)?),
            None => None,
        };
        self.keys.insert(key.to_vec(), KeyState { seq, node });
        Ok(node.map_or(Applied::Deleted, Applied::Put))
    }

    /// A new live node for `key`.
    fn push(&mut self, key: &[u8], text_hash: u64) -> Result<u32> {
        let id = u32::try_from(self.nodes.len())
            .ok()
            .filter(|&id| id < u32::MAX)
            .ok_or_else(|| Error::invalid("the semantic index is full (2^32 - 1 nodes)"))?;
        self.nodes.push(Node {
            key: key.to_vec(),
            text_hash,
            live: true,
        });
        self.live += 1;
        Ok(id)
    }

    /// Make node `id` dead, here and (if it is there yet) in the graph.
    pub(super) fn kill(&mut self, id: u32) {
        if let Some(node) = self.nodes.get_mut(id as usize) {
            if node.live {
                node.live = false;
                self.live -= 1;
            }
        }
        // A node whose insert has not happened yet is tombstoned by its inserter, which
        // checks liveness after inserting (see `Semantic::insert_vectors`).
        let _ = self.graph.mark_deleted(NodeId(id));
    }

    /// True if node `id` is live and its key within `opts`' bounds.
    pub(super) fn admits(&self, id: NodeId, opts: &SearchOptions) -> bool {
        self.nodes
            .get(id.0 as usize)
            .is_some_and(|n| n.live && opts.admits(&n.key))
    }

    pub(super) fn is_live(&self, id: u32) -> bool {
        self.nodes.get(id as usize).is_some_and(|n| n.live)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stale_changes_are_ignored() {
        let mut index = Index::new(2, HnswParams::with_m(4)).unwrap();
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
}
