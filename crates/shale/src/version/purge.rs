//! The purge thread: cleanup that no reader should wait for.
//!
//! Whoever drops the last reference to an old version deletes the SSTables only it listed,
//! and whoever drops the last reference to a flushed memtable frees its arena. Without this
//! module that can be any thread, a reader's included: in a tree of 16 KiB files, the reader
//! that let go of the version before an L0->L1 compaction unlinked the thousands of files
//! the compaction replaced (about 80 µs each on ext4 mounted with `discard`), and one get
//! took 4.6 s. RocksDB moves the same work off the foreground
//! (`avoid_unnecessary_blocking_io`).
//!
//! So those drops only queue the work here, and one background thread does it. A purger
//! that is not running (never started, or stopped at close) does the work in the caller,
//! so nothing is ever left undone: work queued before the stop is drained first.

use std::path::Path;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;

use crate::error::{Error, Result};
use crate::sync::lock;

/// Work for the purge thread: closing an SSTable no version lists any more and deleting
/// its file (`TableCache::retire`), or dropping values whose drop may be slow (the
/// memtables and version of a super version).
pub(crate) type Job = Box<dyn FnOnce() + Send>;

#[derive(Default)]
struct Queue {
    work: Vec<Job>,
    /// The thread is doing work it has taken off `work`.
    busy: bool,
    running: bool,
}

/// The queue shared by the purge thread and everything that retires garbage.
#[derive(Default)]
pub(crate) struct Purger {
    queue: Mutex<Queue>,
    /// Signalled when work arrives or the purger stops.
    work_cv: Condvar,
    /// Signalled when the thread has done all queued work.
    idle_cv: Condvar,
}

impl Purger {
    /// Queue `job` for the thread, or do it here if no thread is running to take it.
    pub fn defer(&self, job: Job) {
        let mut q = lock(&self.queue);
        if !q.running {
            drop(q);
            job();
            return;
        }
        q.work.push(job);
        self.work_cv.notify_one();
    }

    /// Block until everything queued so far is done.
    pub fn wait_idle(&self) {
        let mut q = lock(&self.queue);
        while q.busy || !q.work.is_empty() {
            q = self.idle_cv.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Let the thread finish what is queued and exit; later garbage is done in place.
    pub fn stop(&self) {
        lock(&self.queue).running = false;
        self.work_cv.notify_all();
    }
}

/// Start the purge thread.
pub(crate) fn spawn(purger: &Arc<Purger>) -> Result<JoinHandle<()>> {
    // Running before the thread exists, so that it cannot see a stopped purger and exit.
    lock(&purger.queue).running = true;
    let thread_purger = Arc::clone(purger);
    std::thread::Builder::new()
        .name("shale-purge".into())
        .spawn(move || purge_loop(&thread_purger))
        .map_err(|e| {
            purger.stop();
            let work = std::mem::take(&mut lock(&purger.queue).work);
            work.into_iter().for_each(|job| job());
            Error::io("spawn purge thread", Path::new(""), e)
        })
}

fn purge_loop(purger: &Purger) {
    let mut q = lock(&purger.queue);
    loop {
        if q.work.is_empty() {
            q.busy = false;
            purger.idle_cv.notify_all();
            if !q.running {
                return;
            }
            q = purger.work_cv.wait(q).unwrap_or_else(|e| e.into_inner());
            continue;
        }
        q.busy = true;
        let work = std::mem::take(&mut q.work);
        drop(q);
        // Dropping a version here may retire more tables: they queue up behind the lock
        // this thread no longer holds.
        work.into_iter().for_each(|job| job());
        q = lock(&purger.queue);
    }
}
