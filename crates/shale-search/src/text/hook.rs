//! The write hook of a text index: refuses a value it cannot read as text, derives each
//! document record in the batch of the value it comes from, and queues the committed
//! records for the in-memory index in commit order.
//!
//! ```text
//!   Db::write ── admit: over PENDING_LIMIT_BYTES queued, the writer applies them itself
//!   ── derive: a value under the prefix must be UTF-8 text (or a vector value), else the
//!   batch is refused; put ──► record put, delete ──► record delete, range delete ──►
//!   record range delete (clipped to the prefix), all in the index's keyspace
//!   ── WAL, memtable ──
//!   committed: the derived records ──► the pending queue (bytes copied, in seq order)
//!   applier thread, or a search: queue ──► Inverted (write lock), changed_at = their seq
//! ```
//!
//! Deriving a record needs nothing but the entry itself: no read, no state. So every
//! record is written atomically with its value, recovered with it after a crash, and a
//! hook that attaches late only has to reconcile what was written while it was away
//! (`open.rs`).
//!
//! Applying records to the inverted index is about half of a put's cost, and nothing in
//! the write needs it: it is for searches. So the commit only queues them, and a thread of
//! the index's own applies the queue in batches on another core. A search first applies
//! whatever is queued up to its snapshot (`TextIndex::view`), so it still sees every
//! acknowledged write: the queue moves the work, never the moment a write is found.
//!
//! While the index opens, `committed` queues the records in a backlog instead (the
//! inverted index is still being built); the opener applies the backlog and goes live
//! under the same lock, so no record is missed or applied twice.

use std::any::Any;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::thread::JoinHandle;

use shale::{BatchEntry, Error, KeyspaceId, Result, SeqNo, ValueKind, WriteBatch, WriteHook};

use super::analyzer::Analyzer;
use super::format::{doc_key, doc_key_of, DocRecord, DocView};
use super::inverted::Inverted;

/// A record change, owned: what the backlog holds while the index opens.
#[derive(Debug)]
pub(crate) enum Change {
    Put(Vec<u8>, DocRecord),
    Delete(Vec<u8>),
    DeleteRange(Vec<u8>, Option<Vec<u8>>),
}

impl Change {
    /// The change a derived entry of the index's keyspace makes.
    fn of(e: &BatchEntry<'_>) -> Option<Change> {
        let key = doc_key_of(e.key);
        match e.kind {
            ValueKind::Put => Some(Change::Put(key?.to_vec(), DocRecord::decode(e.value).ok()?)),
            ValueKind::Delete => Some(Change::Delete(key?.to_vec())),
            ValueKind::RangeDelete => Some(Change::DeleteRange(
                key.unwrap_or(&[]).to_vec(),
                doc_key_of(e.value).map(<[u8]>::to_vec),
            )),
        }
    }

    pub(crate) fn apply(&self, ix: &mut Inverted) {
        match self {
            Change::Put(key, record) => ix.put(key, &record.view()),
            Change::Delete(key) => ix.remove(key),
            Change::DeleteRange(start, end) => ix.remove_range(start, end.as_deref()),
        }
    }
}

/// What searches and the hook share.
pub(crate) struct Shared {
    index: RwLock<Inverted>,
    /// The sequence number of the last record applied: a search reads the index only at
    /// a database snapshot at or after it (`mod.rs`).
    changed_at: AtomicU64,
    /// What the opener follows while the index opens (`open.rs`).
    tracking: Mutex<Tracking>,
    /// Records committed and not yet applied. Taken only with the index's write lock
    /// held, so while a search holds the read lock every record is either applied or here.
    pending: Mutex<Pending>,
    /// Wakes the applier thread.
    wake: Condvar,
}

/// The bytes of queued records past which a writer applies the queue itself (in `admit`,
/// before it takes the `log` lock) instead of leaving it to the applier: the queue's
/// memory bound, exceeded by at most the writes of one write group.
const PENDING_LIMIT_BYTES: usize = 256 << 10;
/// Records queued before a commit wakes an idle applier: the applier's batch, which spares
/// the writer a wake-up per put.
const APPLIER_WAKE_RECORDS: usize = 64;

/// The records waiting for the applier, and the applier's state.
#[derive(Default)]
pub(crate) struct Pending {
    queue: Queue,
    /// The applier is waiting for [`APPLIER_WAKE_RECORDS`].
    applier_idle: bool,
    stop: bool,
}

/// Committed records in commit order; their keys and values in one buffer, reused.
#[derive(Default)]
struct Queue {
    bytes: Vec<u8>,
    records: Vec<Queued>,
}

struct Queued {
    seq: u64,
    kind: ValueKind,
    key: Range<usize>,
    value: Range<usize>,
}

impl Queue {
    fn push(&mut self, seq: u64, e: &BatchEntry<'_>) {
        let key = self.bytes.len()..self.bytes.len() + e.key.len();
        self.bytes.extend_from_slice(e.key);
        let value = self.bytes.len()..self.bytes.len() + e.value.len();
        self.bytes.extend_from_slice(e.value);
        self.records.push(Queued {
            seq,
            kind: e.kind,
            key,
            value,
        });
    }

    /// Apply every record to `ix`; the last one's sequence number.
    fn apply(&self, ix: &mut Inverted) -> Option<u64> {
        for q in &self.records {
            let record = self.bytes.get(q.key.clone()).and_then(doc_key_of);
            let value = self.bytes.get(q.value.clone()).unwrap_or(&[]);
            match (q.kind, record) {
                (ValueKind::Put, Some(key)) => {
                    if let Ok(record) = DocView::decode(value) {
                        ix.put(key, &record);
                    }
                }
                (ValueKind::Delete, Some(key)) => ix.remove(key),
                (ValueKind::RangeDelete, _) => {
                    ix.remove_range(record.unwrap_or(&[]), doc_key_of(value));
                }
                _ => {}
            }
        }
        self.records.last().map(|q| q.seq)
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.records.clear();
    }
}

/// While an index opens: the records committed before it went live, and the documents
/// written since its snapshot, whose records the open must not overwrite.
#[derive(Default)]
pub(crate) struct Tracking {
    /// `Some` until the index goes live: the records committed meanwhile, in order.
    pub backlog: Option<Vec<Change>>,
    /// `Some` until the open's repairs are written: every document key written, and every
    /// range deleted, since the open's snapshot.
    pub touched: Option<Touched>,
    /// The sequence number of the backlog's last record.
    pub backlog_last: u64,
}

/// Document keys and ranges written since a snapshot.
#[derive(Default)]
pub(crate) struct Touched {
    keys: std::collections::BTreeSet<Vec<u8>>,
    ranges: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

impl Touched {
    fn record(&mut self, change: &Change) {
        match change {
            Change::Put(key, _) | Change::Delete(key) => {
                self.keys.insert(key.clone());
            }
            Change::DeleteRange(start, end) => self.ranges.push((start.clone(), end.clone())),
        }
    }

    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        self.keys.contains(key)
            || self
                .ranges
                .iter()
                .any(|(s, e)| key >= s.as_slice() && e.as_ref().is_none_or(|e| key < e.as_slice()))
    }
}

impl Shared {
    pub(crate) fn opening() -> Shared {
        Shared {
            index: RwLock::new(Inverted::default()),
            changed_at: AtomicU64::new(0),
            tracking: Mutex::new(Tracking {
                backlog: Some(Vec::new()),
                touched: Some(Touched::default()),
                backlog_last: 0,
            }),
            pending: Mutex::new(Pending::default()),
            wake: Condvar::new(),
        }
    }

    pub(crate) fn read(&self) -> RwLockReadGuard<'_, Inverted> {
        self.index.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn write(&self) -> RwLockWriteGuard<'_, Inverted> {
        self.index.write().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn tracking(&self) -> MutexGuard<'_, Tracking> {
        self.tracking.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn changed_at(&self) -> SeqNo {
        SeqNo(self.changed_at.load(Ordering::Acquire))
    }

    fn pending(&self) -> MutexGuard<'_, Pending> {
        self.pending.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether a record committed at or before `seq` waits in the queue. Under the
    /// index's lock (read or write), no record is between the queue and the index.
    pub(crate) fn queued_through(&self, seq: SeqNo) -> bool {
        self.pending()
            .queue
            .records
            .first()
            .is_some_and(|q| q.seq <= seq.0)
    }

    /// Apply every queued record to the index, under its write lock.
    pub(crate) fn apply_pending(&self) {
        let mut ix = self.write();
        let mut queue = std::mem::take(&mut self.pending().queue);
        if let Some(last) = queue.apply(&mut ix) {
            // Under the write lock: a search that holds the read lock sees the index and
            // the sequence number of its last change together.
            self.changed_at.store(last, Ordering::Release);
        }
        drop(ix);
        queue.clear();
        let mut p = self.pending();
        if p.queue.records.is_empty() && p.queue.bytes.capacity() < queue.bytes.capacity() {
            p.queue = queue;
        }
    }

    /// The applier thread: apply the queue whenever a commit wakes it, until stopped.
    fn run_applier(&self) {
        loop {
            let mut p = self.pending();
            while p.queue.records.is_empty() && !p.stop {
                p.applier_idle = true;
                p = self.wake.wait(p).unwrap_or_else(|e| e.into_inner());
            }
            p.applier_idle = false;
            if p.stop {
                return;
            }
            drop(p);
            self.apply_pending();
        }
    }

    /// Install `built` (the index as of the open's snapshot), apply the backlog over it
    /// and go live: from then on `committed` applies records directly.
    pub(crate) fn go_live(&self, mut built: Inverted) {
        let mut tracking = self.tracking();
        for change in tracking.backlog.take().unwrap_or_default() {
            change.apply(&mut built);
        }
        let mut ix = self.write();
        *ix = built;
        self.changed_at
            .store(tracking.backlog_last, Ordering::Release);
    }
}

/// The hook attached to the database.
pub(crate) struct TextHook {
    /// `text:<index name>`, unique among the database's hooks.
    pub name: String,
    /// [the documents' keyspace, the index's own]
    pub keyspaces: [KeyspaceId; 2],
    pub prefix: Vec<u8>,
    /// The end of the prefix's keys (`None`: no end).
    pub prefix_end: Option<Vec<u8>>,
    pub analyzer: Analyzer,
    pub shared: Arc<Shared>,
    /// The thread that applies the queued records, once the index is live.
    pub applier: Mutex<Option<JoinHandle<()>>>,
}

impl TextHook {
    /// Start the thread that applies queued records.
    ///
    /// # Errors
    /// `Io` if the thread cannot be spawned.
    pub(crate) fn start_applier(&self) -> Result<()> {
        let shared = Arc::clone(&self.shared);
        let handle = std::thread::Builder::new()
            .name("shale-text".into())
            .spawn(move || shared.run_applier())
            .map_err(|e| Error::io("spawn text index thread", "", e))?;
        *self.applier.lock().unwrap_or_else(|e| e.into_inner()) = Some(handle);
        Ok(())
    }

    /// Stop the applier thread and wait for it. What it leaves queued, a search applies.
    fn stop_applier(&self) {
        self.shared.pending().stop = true;
        self.shared.wake.notify_all();
        let handle = self
            .applier
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if let Some(handle) = handle {
            let _ = handle.join();
        }
    }

    fn data(&self) -> KeyspaceId {
        self.keyspaces[0]
    }

    fn records(&self) -> KeyspaceId {
        self.keyspaces[1]
    }

    /// The part of `[start, end)` inside the prefix, if any.
    fn clip<'a>(&'a self, start: &'a [u8], end: &'a [u8]) -> Option<(&'a [u8], &'a [u8])> {
        let lo = start.max(self.prefix.as_slice());
        let hi = match &self.prefix_end {
            Some(pe) => end.min(pe.as_slice()),
            None => end,
        };
        (lo < hi).then_some((lo, hi))
    }

    /// The record of value `value` of document `key`.
    pub(crate) fn record(&self, key: &[u8], value: &[u8]) -> Result<DocRecord> {
        let text = self.text_of(key, value)?;
        Ok(DocRecord::analyze(self.analyzer, text, value_hash(value)))
    }

    /// The text of value `value` of document `key`: UTF-8, or a vector value's payload.
    fn text_of<'v>(&self, key: &[u8], value: &'v [u8]) -> Result<&'v str> {
        document_text(value).map_err(|why| {
            Error::InvalidArgument(format!(
                "the value of key {:?} is {why}, and the key is in text index {:?} (prefix \
                 {:?}); nothing was written",
                String::from_utf8_lossy(key),
                self.name.trim_start_matches("text:"),
                String::from_utf8_lossy(&self.prefix)
            ))
        })
    }
}

impl Drop for TextHook {
    fn drop(&mut self) {
        self.stop_applier();
    }
}

/// The hash that ties a document record to its value: xxh3-64 of the value's bytes.
pub(crate) fn value_hash(value: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(value)
}

/// The text a value holds: itself if UTF-8; a vector value's payload (a semantic index's
/// `put_vector` on the same prefix), or nothing if that payload is not UTF-8.
pub(crate) fn document_text(value: &[u8]) -> std::result::Result<&str, String> {
    match crate::semantic::decode_vector_value(value) {
        Some(Ok(v)) => return Ok(std::str::from_utf8(v.payload).unwrap_or("")),
        Some(Err(why)) => {
            return Err(format!(
                "neither UTF-8 text nor a well-formed vector value ({why})"
            ))
        }
        None => {}
    }
    std::str::from_utf8(value).map_err(|e| {
        format!(
            "neither UTF-8 text (invalid byte at {}) nor a vector value",
            e.valid_up_to()
        )
    })
}

impl WriteHook for TextHook {
    fn name(&self) -> &str {
        &self.name
    }

    fn keyspaces(&self) -> &[KeyspaceId] {
        &self.keyspaces
    }

    fn admit(&self, _batch: &WriteBatch) -> Result<()> {
        if self.shared.pending().queue.bytes.len() >= PENDING_LIMIT_BYTES {
            self.shared.apply_pending();
        }
        Ok(())
    }

    fn check(&self, _batch: &WriteBatch) -> Result<()> {
        // A value that is not text is refused by `derive`, which reads each value once.
        Ok(())
    }

    fn derive(&self, batch: &WriteBatch, derived: &mut WriteBatch) -> Result<()> {
        for e in batch.iter().filter(|e| e.keyspace == self.data()) {
            match e.kind {
                ValueKind::Put if e.key.starts_with(&self.prefix) => {
                    let text = self.text_of(e.key, e.value)?;
                    let record =
                        DocRecord::analyze_encoded(self.analyzer, text, value_hash(e.value));
                    derived.put_in(self.records(), doc_key(e.key), record);
                }
                ValueKind::Delete if e.key.starts_with(&self.prefix) => {
                    derived.delete_in(self.records(), doc_key(e.key));
                }
                ValueKind::RangeDelete => {
                    if let Some((lo, hi)) = self.clip(e.key, e.value) {
                        derived.delete_range_in(self.records(), doc_key(lo), doc_key(hi));
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn committed(&self, batch: &WriteBatch, derived: &WriteBatch, first: SeqNo) {
        let mine = || derived.iter().filter(|e| e.keyspace == self.records());
        let Some(last) = mine().map(|e| e.seq.0).max() else {
            return;
        };
        let last = first.0 + batch.len() as u64 + last;
        let mut tracking = self.shared.tracking();
        if tracking.touched.is_some() || tracking.backlog.is_some() {
            let changes: Vec<Change> = mine().filter_map(|e| Change::of(&e)).collect();
            if let Some(touched) = tracking.touched.as_mut() {
                changes.iter().for_each(|c| touched.record(c));
            }
            if let Some(queued) = tracking.backlog.as_mut() {
                queued.extend(changes);
                tracking.backlog_last = last;
                return;
            }
        }
        drop(tracking);
        let mut p = self.shared.pending();
        for e in mine() {
            p.queue.push(first.0 + batch.len() as u64 + e.seq.0, &e);
        }
        let wake = p.applier_idle && p.queue.records.len() >= APPLIER_WAKE_RECORDS;
        if wake {
            p.applier_idle = false;
        }
        drop(p);
        if wake {
            self.shared.wake.notify_one();
        }
    }

    fn close(&self) -> Result<()> {
        self.stop_applier();
        Ok(())
    }

    fn as_any(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}
