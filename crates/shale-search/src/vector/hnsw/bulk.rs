//! Building a graph from many vectors at once, on several threads: [`Hnsw::insert_all`] and
//! the tombstone reclaim [`Hnsw::rebuilt`].

use std::sync::atomic::{AtomicUsize, Ordering};

use super::Hnsw;
use crate::vector::NodeId;
use shale::error::{Error, Result};

impl Hnsw {
    /// A new graph with the same parameters holding only the live (not tombstoned) nodes,
    /// under the same ids, built by `threads` threads (at least one).
    ///
    /// Inserts and deletes that run concurrently with the rebuild may or may not be in the
    /// result: the owner either holds its writes off while it rebuilds, or replays them into
    /// the new graph before swapping it in.
    ///
    /// # Errors
    /// None in practice: every node it inserts came from a valid graph.
    pub fn rebuilt(&self, threads: usize) -> Result<Hnsw> {
        let fresh = Hnsw::new(self.dim, self.params)?;
        let live: Vec<NodeId> = self
            .ids()
            .filter(|&id| !self.nodes.is_deleted(id.0))
            .collect();
        fresh.insert_codes(&live, |id| self.nodes.code(id.0), threads)?;
        Ok(fresh)
    }

    /// Insert `ids` with the vectors `vector_of` gives for them, from `threads` threads that
    /// take ids in order from a shared counter. With one thread the graph is deterministic.
    ///
    /// # Errors
    /// The first error of [`Hnsw::insert`]; `Error::InvalidArgument` if `vector_of` has no
    /// vector for an id.
    pub fn insert_all<'v, F>(&self, ids: &[NodeId], vector_of: F, threads: usize) -> Result<()>
    where
        F: Fn(NodeId) -> Option<&'v [f32]> + Sync,
    {
        self.on_threads(ids, threads, |id| {
            let v = vector_of(id)
                .ok_or_else(|| Error::invalid(format!("no vector for node {}", id.0)))?;
            self.insert(id, v)
        })
    }

    /// [`Hnsw::insert_all`] with the codes `code_of` gives (see [`Hnsw::insert_code`]).
    ///
    /// # Errors
    /// As [`Hnsw::insert_all`].
    pub fn insert_codes<'c, F>(&self, ids: &[NodeId], code_of: F, threads: usize) -> Result<()>
    where
        F: Fn(NodeId) -> Option<&'c [u8]> + Sync,
    {
        self.on_threads(ids, threads, |id| {
            let code =
                code_of(id).ok_or_else(|| Error::invalid(format!("no code for node {}", id.0)))?;
            self.insert_code(id, code)
        })
    }

    /// Run `insert` for each of `ids`, on `threads` threads taking ids in order from a
    /// shared counter; the first error wins.
    fn on_threads<F>(&self, ids: &[NodeId], threads: usize, insert: F) -> Result<()>
    where
        F: Fn(NodeId) -> Result<()> + Sync,
    {
        let next = AtomicUsize::new(0);
        let work = || -> Result<()> {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&id) = ids.get(i) else {
                    return Ok(());
                };
                insert(id)?;
            }
        };
        if threads <= 1 {
            return work();
        }
        std::thread::scope(|scope| {
            let handles: Vec<_> = (0..threads).map(|_| scope.spawn(work)).collect();
            let mut result = Ok(());
            for h in handles {
                let r = h
                    .join()
                    .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                if result.is_ok() {
                    result = r;
                }
            }
            result
        })
    }
}
