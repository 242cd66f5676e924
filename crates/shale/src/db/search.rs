//! Semantic search on a [`Db`]: the write hook that queues texts for the index, and the
//! search calls (see `vector/semantic/` for the index and its consistency rules).

use std::sync::Arc;

use super::Db;
use crate::batch::{self, WriteBatch};
use crate::error::{Error, Result};
use crate::key::{SeqNo, ValueKind};
use crate::options::WriteOptions;
use crate::vector::hnsw::MAX_EF;
use crate::vector::{
    text_hash, Change, IndexRecovery, Method, SearchHit, SearchOptions, Semantic, SemanticOptions,
};

/// Open the index of `db` and reconcile it with the values `db` holds now.
pub(super) fn open_semantic(db: &Db, opts: SemanticOptions) -> Result<Arc<Semantic>> {
    let seq = db
        .inner
        .visible_seq
        .load(std::sync::atomic::Ordering::Acquire);
    let values = || db.range::<&[u8]>(..);
    Semantic::open(&db.inner.dir, &db.inner.opts, opts, values, seq)
}

/// Commit `batch` and queue its changes for the index. A value that is not UTF-8 text
/// fails the whole batch before anything is written.
pub(super) fn write_indexed(
    db: &Db,
    semantic: &Semantic,
    batch: WriteBatch,
    opts: WriteOptions,
) -> Result<()> {
    let mut changes = Vec::with_capacity(batch.len());
    for entry in batch::decode_entries(batch.body(), SeqNo(0)) {
        // The batch was encoded by `WriteBatch` itself, so it always decodes.
        let entry = entry.map_err(|e| Error::invalid(e.reason))?;
        let text = match entry.kind {
            ValueKind::Put => Some(String::from_utf8(entry.value.to_vec()).map_err(|e| {
                Error::invalid(format!(
                    "semantic search is on and the value of key {:?} is not UTF-8 text \
                         (invalid byte at {}); nothing was written",
                    String::from_utf8_lossy(entry.key),
                    e.utf8_error().valid_up_to()
                ))
            })?),
            ValueKind::Delete => None,
        };
        changes.push(Change {
            key: entry.key.to_vec(),
            seq: entry.seq.0,
            text,
        });
    }
    // The write gets sequence numbers above every one visible now.
    let visible = db
        .inner
        .visible_seq
        .load(std::sync::atomic::Ordering::Acquire);
    let registration = semantic.register(visible + 1);
    let first = db.inner.write(batch, opts)?;
    for change in &mut changes {
        change.seq += first.0;
    }
    semantic.enqueue(changes, registration);
    Ok(())
}

impl Db {
    fn semantic(&self) -> Result<&Semantic> {
        self.semantic.as_deref().ok_or_else(|| {
            Error::invalid("semantic search is off for this database (Options::semantic)")
        })
    }

    /// The `k` values most similar in meaning to `query`, by exact (brute-force) search
    /// over every indexed value; best first.
    ///
    /// Sees every write acknowledged before the call (it waits for their embedding), and
    /// never returns a key that is deleted or whose text was replaced.
    ///
    /// # Errors
    /// `InvalidArgument` if semantic search is off; `Embedding` if the model fails.
    pub fn search_knn(&self, query: &str, k: usize) -> Result<Vec<SearchHit>> {
        self.search_text(query, k, &SearchOptions::default(), true)
    }

    /// [`Db::search_knn`] through the HNSW graph (approximate, with the graph's
    /// `ef_search`): the same guarantees about deleted and replaced texts.
    pub fn search_knn_hnsw(&self, query: &str, k: usize) -> Result<Vec<SearchHit>> {
        self.search_text(query, k, &SearchOptions::default(), false)
    }

    /// Search by text among the keys `opts` admits; `exact` chooses brute force over
    /// HNSW (a narrow key range is searched exactly either way).
    pub fn search_text(
        &self,
        query: &str,
        k: usize,
        opts: &SearchOptions,
        exact: bool,
    ) -> Result<Vec<SearchHit>> {
        let vector = self.semantic()?.embed_query(query)?;
        let method = if exact {
            Method::Exact
        } else {
            Method::Hnsw(opts.ef)
        };
        self.search_with(&vector, k, opts, method)
    }

    /// The `k` indexed values nearest to `vector` (of the model's dimension) among the
    /// keys `opts` admits, exactly or through HNSW.
    pub fn search_vector(
        &self,
        vector: &[f32],
        k: usize,
        opts: &SearchOptions,
        exact: bool,
    ) -> Result<Vec<SearchHit>> {
        let method = if exact {
            Method::Exact
        } else {
            Method::Hnsw(opts.ef)
        };
        self.search_with(vector, k, opts, method)
    }

    fn search_with(
        &self,
        vector: &[f32],
        k: usize,
        opts: &SearchOptions,
        method: Method,
    ) -> Result<Vec<SearchHit>> {
        let semantic = self.semantic()?;
        for (name, n) in [("k", Some(k)), ("ef", opts.ef)] {
            if n.is_some_and(|n| n > MAX_EF) {
                return Err(Error::invalid(format!(
                    "search {name} = {} exceeds the limit of {MAX_EF}",
                    n.unwrap_or_default()
                )));
            }
        }
        let mut fetch = k;
        loop {
            let candidates = semantic.search(vector, fetch, opts, method)?;
            let exhausted = candidates.len() < fetch;
            let hits = self.verify(candidates, k)?;
            if hits.len() >= k || exhausted {
                return Ok(hits);
            }
            // Some candidates changed under us: ask for more.
            fetch = fetch.saturating_mul(2);
        }
    }

    /// Keep the candidates whose current value still has the text the index embedded.
    fn verify(&self, candidates: Vec<(Vec<u8>, u64, f32)>, k: usize) -> Result<Vec<SearchHit>> {
        let mut hits = Vec::with_capacity(k.min(candidates.len()));
        for (key, hash, score) in candidates {
            if hits.len() == k {
                break;
            }
            let Some(value) = self.get(&key)? else {
                continue;
            };
            if text_hash(&value) != hash {
                continue;
            }
            let text = String::from_utf8(value).map_err(|_| {
                Error::invalid("an indexed value is no longer UTF-8 text".to_string())
            })?;
            hits.push(SearchHit { key, text, score });
        }
        Ok(hits)
    }

    /// Wait until every value written so far is embedded and in the index.
    pub fn wait_indexed(&self) -> Result<()> {
        self.semantic()?.wait_indexed()
    }

    /// `(applied, queued)`: index changes (puts and deletes of text) applied and queued
    /// since open, without waiting: `queued - applied` texts are still to be embedded.
    pub fn index_progress(&self) -> Result<(u64, u64)> {
        Ok(self.semantic()?.progress())
    }

    /// Write the HNSW graph's checkpoint now (also done by `close`), so that the next open
    /// after a crash takes the graph over instead of rebuilding it.
    pub fn checkpoint_index(&self) -> Result<()> {
        self.semantic()?.checkpoint()
    }

    /// How the last open found the semantic index (reused, reinserted, re-embedded).
    pub fn index_recovery(&self) -> Result<IndexRecovery> {
        Ok(self.semantic()?.recovery())
    }

    /// One more than the highest node id the semantic index has handed out since open, a
    /// high-water mark (it does not shrink after deletes), without waiting. The index's
    /// memory per node (its node table, the graph's node store, the visited marks of a
    /// search) scales with this, not with the writes so far: the ids of replaced and
    /// deleted values are reused once a graph rebuild has dropped their nodes, which keeps
    /// it within about 4/3 of the most values indexed at once plus the batches being
    /// inserted.
    pub fn index_id_space(&self) -> Result<usize> {
        Ok(self.semantic()?.id_space())
    }

    /// Keys the semantic index keeps a state for, without waiting: one per indexed value,
    /// plus deleted keys whose deletes are recent. A delete is forgotten at the end of a
    /// later batch once no change older than it, of any key, is still to be applied.
    pub fn index_tracked_keys(&self) -> Result<usize> {
        Ok(self.semantic()?.tracked_keys())
    }

    /// Values in the semantic index, once everything written so far is embedded.
    pub fn indexed_len(&self) -> Result<usize> {
        self.semantic()?.len()
    }
}
