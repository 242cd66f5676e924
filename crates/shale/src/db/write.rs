//! The write path.
//!
//! Writers line up in a queue. The writer at the front is the *leader*: it takes the
//! batches of the writers behind it (a *group*), writes them to the WAL as one record,
//! syncs once if any of them asked for `sync`, inserts them into the memtable, publishes
//! their sequence numbers, and wakes the followers. So N concurrent sync writers share
//! one fsync. The leader collects its group only once it holds the `log` lock, so every
//! writer that queued while the previous group committed joins it.
//!
//! A writer that finds nobody queued and the `log` lock free does not queue at all: it
//! commits alone under that one lock (a `try_lock`), allocates nothing shared, and, in the
//! default mode, makes no system call: the WAL is a memory mapping (see `fs/`) whose next
//! chunk a helper thread prepares ahead of time. A writer arriving meanwhile queues; it
//! leads once the lone writer releases `log`.
//!
//! ```text
//!   writers ──► [ w1 | w2 | w3 ]      w1 leads: WAL(w1+w2+w3) ─► fsync? ─► memtable
//!                 ▲ leader              then marks w1..w3 done and wakes w4 (next leader)
//! ```
//!
//! Back-pressure happens in the leader before it writes (`make_room`): when the frozen
//! memtables waiting for flush, or the L0 files waiting for compaction, pass a soft limit,
//! the group is delayed in proportion to its size and to the measured drain rate; at the
//! hard limit the leader waits for background work to free room. Both waits are on the
//! background condition variable, so a finished flush or compaction wakes the writer at
//! once; neither polls. With no pressure, the check reads atomics and takes no lock.

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::state::{Condition, DbInner, DbState, ImmMemTable, LogState, Writer};
use super::stats::Stats;
use super::tree::{MemSet, MemSlot};
use crate::batch::{self, WriteBatch};
use crate::error::{Error, Result};
use crate::filename::wal_path;
use crate::key::SeqNo;
use crate::keyspace::KeyspaceId;
use crate::memtable::MemTable;
use crate::options::{Options, WriteOptions};
use crate::perf::Timer;
use crate::sync::lock;
use crate::wal::LogWriter;

/// A group never grows past this many bytes, so one slow fsync cannot hold up an
/// unbounded amount of work.
const MAX_GROUP_BYTES: usize = 1 << 20;
/// A small leader keeps its group small, so that its own latency stays low.
const SMALL_BATCH_BYTES: usize = 128 << 10;

impl Writer {
    /// What a follower's write came to, once its leader marked it done.
    fn outcome(&self) -> Result<SeqNo> {
        match lock(&self.error).take() {
            Some(e) => Err(e),
            None => Ok(SeqNo(self.first_seq.load(Ordering::Acquire))),
        }
    }
}

/// The rate writes are slowed to, in bytes per second, when frozen memtables (past
/// `imm_slow` of `imm_stop`) or L0 files (past their slowdown trigger) pile up: a fraction
/// of the rate the more pressed background work drains. `None` under no pressure.
fn slowdown_rate(state: &DbState, opts: &Options, imm_slow: usize, imm_stop: usize) -> Option<f64> {
    let imm_pressure = pressure(state.imm.len(), imm_slow, imm_stop + 1);
    let l0_pressure = pressure(
        state.l0_files,
        opts.level0_slowdown_trigger,
        opts.level0_stop_trigger,
    );
    let slowed = imm_pressure > 0.0 || l0_pressure > 0.0;
    let rate = if imm_pressure >= l0_pressure {
        state.flush_bytes_per_sec * (1.0 - imm_pressure)
    } else {
        state.compaction_bytes_per_sec * (1.0 - l0_pressure)
    };
    slowed.then_some(rate)
}

/// A writer whose batch every check passed, with the records the write hooks derived from
/// it (`hook.rs`): they commit together.
struct Admitted<'a> {
    writer: &'a Writer,
    derived: WriteBatch,
}

/// Admit `w`'s batch under the `log` lock: its keyspaces exist, its own condition and every
/// write hook accept it; then each hook derives its records. Returns the derived records,
/// or the first refusal.
fn admit_locked<'a>(db: &DbInner, log: &LogState, w: &'a Writer) -> Result<Admitted<'a>> {
    keyspaces_exist(log, &w.batch)?;
    if let Some(condition) = &w.condition {
        condition(db, log)?;
    }
    log.hooks.iter().try_for_each(|hook| hook.check(&w.batch))?;
    let mut derived = WriteBatch::new();
    for hook in &log.hooks {
        hook.derive(&w.batch, &mut derived)?;
    }
    if !derived.is_empty() {
        derived.check()?;
        keyspaces_exist(log, &derived)?;
        if w.batch.count().checked_add(derived.count()).is_none() {
            return Err(Error::invalid(
                "a batch and its derived records hold too many entries",
            ));
        }
    }
    Ok(Admitted { writer: w, derived })
}

/// [`admit_locked`] for each writer of `group`: those admitted, with their derived records,
/// and each writer's refusal, in queue order. A refused batch leaves the group with its
/// own error; the rest commit.
fn admit_group<'a>(
    db: &DbInner,
    log: &LogState,
    group: &'a [Arc<Writer>],
) -> (Vec<Admitted<'a>>, Vec<Option<Error>>) {
    let mut admitted = Vec::with_capacity(group.len());
    let mut refusals = Vec::with_capacity(group.len());
    for w in group {
        match admit_locked(db, log, w) {
            Ok(a) => {
                admitted.push(a);
                refusals.push(None);
            }
            Err(e) => refusals.push(Some(e)),
        }
    }
    (admitted, refusals)
}

/// Checked under the lock a drop takes, so no write reaches a dropped keyspace.
fn keyspaces_exist(log: &LogState, batch: &WriteBatch) -> Result<()> {
    if !batch.has_keyspaces() {
        return Ok(());
    }
    match batch.iter().find(|e| log.mems.get(e.keyspace).is_none()) {
        Some(e) => Err(Error::invalid(format!(
            "keyspace {} does not exist (dropped?)",
            e.keyspace.0
        ))),
        None => Ok(()),
    }
}

impl DbInner {
    /// Commit `batch`; returns the sequence number of its first entry (that of the last
    /// write before it if the batch is empty).
    pub(crate) fn write(&self, batch: WriteBatch, opts: WriteOptions) -> Result<SeqNo> {
        self.write_if(batch, opts, None)
    }

    /// [`DbInner::write`], committing `batch` only if `condition` (when given) returns
    /// `Ok` when it runs under the `log` lock, after every earlier write is in the memtable
    /// and before any later one: its error is the write's. A conditional batch commits in a
    /// group of its own, so that no batch committed in the same group escapes its check.
    pub(crate) fn write_if(
        &self,
        batch: WriteBatch,
        opts: WriteOptions,
        condition: Option<Condition>,
    ) -> Result<SeqNo> {
        self.check_writable()?;
        batch.check()?;
        if opts.sync && opts.disable_wal {
            return Err(Error::invalid(
                "WriteOptions: sync with disable_wal would make nothing durable",
            ));
        }
        if batch.is_empty() {
            return Ok(SeqNo(self.visible_seq.load(Ordering::Acquire)));
        }
        // Nobody queued and the log free: commit alone, under the log lock only. A writer
        // that queues meanwhile leads once it gets the log lock after us.
        if self.writers_queued.load(Ordering::Acquire) == 0 {
            if let Ok(mut log) = self.log.try_lock() {
                let me = Writer::new(batch, opts, condition);
                let admitted = admit_locked(self, &log, &me)?;
                self.commit_locked(&mut log, &[admitted])?;
                return Ok(SeqNo(me.first_seq.load(Ordering::Relaxed)));
            }
        }
        let queued = Timer::start();
        let me = Arc::new(Writer::new(batch, opts, condition));
        if !self.queue_until_leader(&me) {
            queued.stop(|p| &mut p.write_queue_nanos);
            return me.outcome();
        }
        self.lead_group(&me, queued)
    }

    /// Queue `me` and wait: `true` once it is at the front of the queue (it leads the
    /// next group), `false` once a leader committed it in its group (or failed to).
    fn queue_until_leader(&self, me: &Arc<Writer>) -> bool {
        let mut q = lock(&self.writers);
        q.queue.push_back(Arc::clone(me));
        self.writers_queued.fetch_add(1, Ordering::Release);
        loop {
            if me.done.load(Ordering::Acquire) {
                return false;
            }
            if q.queue.front().is_some_and(|w| Arc::ptr_eq(w, me)) {
                return true;
            }
            q = me.cv.wait(q).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Lead a group from the front of the queue: commit the batches of every writer it
    /// holds, then release them and the next leader.
    fn lead_group(&self, me: &Arc<Writer>, queued: Timer) -> Result<SeqNo> {
        // Take the log first, then collect the group: whoever queued while the log was
        // busy (the group before, or a lone writer) commits with us. Lock order: `log`,
        // then `writers`; no one takes them the other way round.
        let mut log = lock(&self.log);
        queued.stop(|p| &mut p.write_queue_nanos);
        if me.opts.sync {
            self.let_the_queue_fill();
        }
        let group = build_group(&lock(&self.writers).queue);
        let (admitted, refusals) = admit_group(self, &log, &group);
        let result = if admitted.is_empty() {
            Ok(())
        } else {
            self.commit_locked(&mut log, &admitted)
        };
        drop(log);
        let mine = self.release_group(me, refusals, &result);
        match (mine, result) {
            (Some(refused), Ok(())) => Err(refused),
            (_, Err(e)) => Err(e),
            (None, Ok(())) => Ok(SeqNo(me.first_seq.load(Ordering::Acquire))),
        }
    }

    /// Take the group led by `me` off the queue, one writer per entry of `refusals`: give
    /// each follower its refusal or the group's failure, and wake the next leader and the
    /// followers. Returns `me`'s own refusal.
    fn release_group(
        &self,
        me: &Arc<Writer>,
        refusals: Vec<Option<Error>>,
        result: &Result<()>,
    ) -> Option<Error> {
        let mut q = lock(&self.writers);
        let failure = |e: &Error| match e {
            Error::Closed => Error::Closed,
            e => Error::Poisoned(e.to_string()),
        };
        let mut mine = None;
        let mut followers = Vec::with_capacity(refusals.len());
        for refusal in refusals {
            let Some(w) = q.queue.pop_front() else { break };
            self.writers_queued.fetch_sub(1, Ordering::Release);
            let error = refusal.or_else(|| result.as_ref().err().map(failure));
            if Arc::ptr_eq(&w, me) {
                mine = error;
            } else {
                *lock(&w.error) = error;
                w.done.store(true, Ordering::Release);
                followers.push(w);
            }
        }
        let next = q.queue.front().cloned();
        drop(q);
        // The next leader first, and with the queue unlocked: its group's WAL write and
        // fsync then overlap the wake-ups of this group's followers (one futex call each,
        // which on a few cores would otherwise delay the next fsync by the whole group).
        // Each follower's state changed under the queue lock, so no wake-up is lost.
        if let Some(next) = next {
            next.cv.notify_one();
        }
        for w in followers {
            w.cv.notify_one();
        }
        mine
    }

    /// Before a sync group is collected: yield the CPU while the queue still grows, so
    /// that the writers the last group's leader just woke, which need a CPU to queue again,
    /// join this group rather than wait one more fsync for the next.
    fn let_the_queue_fill(&self) {
        const MAX_YIELDS: usize = 32;
        let mut queued = self.writers_queued.load(Ordering::Acquire);
        for _ in 0..MAX_YIELDS {
            std::thread::yield_now();
            let now = self.writers_queued.load(Ordering::Acquire);
            if now == queued {
                return;
            }
            queued = now;
        }
    }

    /// Write a group: make room, WAL, memtable, publish. Runs in the leader, with the `log`
    /// lock held and no other.
    fn commit_locked(&self, log: &mut LogState, group: &[Admitted<'_>]) -> Result<()> {
        // Under the log lock: `close` marks the database closed before it takes this lock
        // to sync the WAL and freeze writes that skipped it, so a group that passed the
        // check at the start of `write` and got here after the close must not commit (its
        // WAL-less writes would be in no flush, and nothing would sync the WAL after it).
        self.check_open()?;
        let user_bytes: usize = group
            .iter()
            .map(|a| a.writer.batch.approximate_size())
            .sum();
        let derived_bytes: usize = group.iter().map(|a| a.derived.body().len()).sum();
        let delay = Timer::start();
        self.make_room(log, user_bytes + derived_bytes)?;
        delay.stop(|p| &mut p.write_delay_nanos);

        let count = group
            .iter()
            .try_fold(0u32, |n, a| {
                n.checked_add(a.writer.batch.count())?
                    .checked_add(a.derived.count())
            })
            .ok_or_else(|| Error::invalid("a write group holds too many entries"))?;
        let first_seq = log.last_seq.next();
        let last_seq = SeqNo(log.last_seq.0 + u64::from(count));
        if last_seq > SeqNo::MAX {
            return Err(Error::Poisoned("sequence numbers exhausted".into()));
        }

        // Start the memtable's hash-index misses now, so that they overlap the WAL append
        // rather than stall the inserts below one after another. A few dozen at most: a
        // large batch's later slots would only push its earlier ones out of the cache.
        const PREFETCH_ENTRIES: usize = 32;
        let keys = group
            .iter()
            .flat_map(|a| batch::decode_entries(a.writer.batch.body(), first_seq))
            .take(PREFETCH_ENTRIES);
        for entry in keys.flatten() {
            if let Some(mem) = log.mems.get(entry.keyspace) {
                mem.prefetch(entry.key);
            }
        }

        let use_wal = !group.iter().all(|a| a.writer.opts.disable_wal);
        if use_wal {
            self.log_group(log, group, first_seq, count)?;
        } else {
            log.unlogged_writes = true;
        }

        let insert = Timer::start();
        let mut seq = first_seq;
        for a in group {
            a.writer.first_seq.store(seq.0, Ordering::Release);
            seq = Self::insert_batch(log, &a.writer.batch, seq)?;
            seq = Self::insert_batch(log, &a.derived, seq)?;
        }
        insert.stop(|p| &mut p.write_memtable_nanos);
        for hook in &log.hooks {
            for a in group {
                let first = SeqNo(a.writer.first_seq.load(Ordering::Relaxed));
                hook.committed(&a.writer.batch, &a.derived, first);
            }
        }
        log.last_seq = last_seq;
        self.visible_seq.store(last_seq.0, Ordering::Release);
        Stats::add_serialized(&self.stats.writes, group.len() as u64);
        Stats::add_serialized(&self.stats.write_groups, 1);
        Stats::add_serialized(&self.stats.user_bytes_written, user_bytes as u64);
        Ok(())
    }

    /// Write the group's batches, each followed by its derived records, as one WAL record;
    /// sync it if a writer asked for that. A failure poisons the database.
    fn log_group(
        &self,
        log: &mut LogState,
        group: &[Admitted<'_>],
        first_seq: SeqNo,
        count: u32,
    ) -> Result<()> {
        // One record: each batch's entries, then those derived from it, in the order
        // of their sequence numbers.
        let header = batch::encode_header(first_seq, count);
        let mut parts: Vec<&[u8]> = Vec::with_capacity(2 * group.len() + 1);
        parts.push(&header);
        for a in group {
            parts.push(a.writer.batch.body());
            if !a.derived.is_empty() {
                parts.push(a.derived.body());
            }
        }
        let before = log.wal.len();
        let wal = Timer::start();
        let sync = group.iter().any(|a| a.writer.opts.sync);
        let added = match sync {
            true => log.wal.add_record_to_sync(&parts),
            false => log.wal.add_record(&parts),
        };
        if let Err(e) = added {
            return Err(self.poison(e));
        }
        wal.stop(|p| &mut p.write_wal_nanos);
        Stats::add_serialized(&self.stats.wal_bytes, log.wal.len() - before);
        if sync {
            let sync = Timer::start();
            if let Err(e) = self.sync_older_wals(log).and_then(|()| log.wal.sync()) {
                return Err(self.poison(e));
            }
            sync.stop(|p| &mut p.write_wal_sync_nanos);
            Stats::add_serialized(&self.stats.wal_syncs, 1);
        }
        Ok(())
    }

    /// Insert `batch`'s entries into their memtables, numbered from `seq`; returns the
    /// number after its last.
    fn insert_batch(log: &LogState, batch: &WriteBatch, seq: SeqNo) -> Result<SeqNo> {
        let keyspaces = batch.has_keyspaces();
        for entry in batch::decode_entries(batch.body(), seq) {
            // The batch was encoded by `WriteBatch` itself, so it always decodes, and
            // `admit_locked` found each of its keyspaces.
            let entry = entry.map_err(|e| Error::invalid(e.reason))?;
            let mem = match keyspaces {
                false => log.mems.default_mem(),
                true => log.mems.get(entry.keyspace).ok_or_else(|| {
                    Error::invalid(format!("keyspace {} does not exist", entry.keyspace.0))
                })?,
            };
            mem.insert(entry.seq, entry.kind, entry.key, entry.value);
        }
        Ok(SeqNo(seq.0 + u64::from(batch.count())))
    }

    /// Record a failure that leaves memory and disk out of step: refuse writes from now on.
    fn poison(&self, e: Error) -> Error {
        let mut state = lock(&self.state);
        if state.bg_error.is_none() {
            state.bg_error = Some(e.to_string());
        }
        self.publish_pressure(&state);
        self.bg_cv.notify_all();
        e
    }

    /// Ensure the active memtable has room for `bytes`, applying back-pressure.
    ///
    /// Two things can fall behind: flushing (frozen memtables pile up) and compaction (L0
    /// files pile up). Each has a soft limit, past which writes are delayed in proportion
    /// to how far past it they are, at a fraction of the rate the background work drains,
    /// and a hard limit, at which writes wait until the background work frees room.
    fn make_room(&self, log: &mut LogState, bytes: usize) -> Result<()> {
        let opts = &self.opts;
        let imm_stop = opts.max_write_buffers - 1;
        let imm_slow = imm_stop.saturating_sub(1).max(1);
        // The common case, decided from atomics: no pressure and room in the memtable.
        let calm = !self.pressure.poisoned.load(Ordering::Acquire)
            && self.pressure.imm.load(Ordering::Acquire) < imm_slow
            && self.pressure.l0_files.load(Ordering::Acquire) < opts.level0_slowdown_trigger;
        if calm && !log.mems.any_full() {
            return Ok(());
        }
        let mut stalled = false;
        loop {
            let mut state = lock(&self.state);
            if let Some(why) = &state.bg_error {
                return Err(Error::Poisoned(why.clone()));
            }
            if state.shutting_down {
                // The background threads are gone or going: nothing would free room.
                return Err(Error::Closed);
            }
            let mem_full = log.mems.any_full();
            let stop = state.l0_files >= opts.level0_stop_trigger
                || (mem_full && state.imm.len() >= imm_stop);
            if stop {
                let start = Instant::now();
                if !stalled {
                    Stats::add(&self.stats.stalls, 1);
                    stalled = true;
                }
                state = self.bg_cv.wait(state).unwrap_or_else(|e| e.into_inner());
                drop(state);
                Stats::add(&self.stats.stall_micros, start.elapsed().as_micros() as u64);
                continue;
            }
            if let Some(rate) = slowdown_rate(&state, opts, imm_slow, imm_stop) {
                log.delay_debt += bytes as f64 / rate.max(64.0 * 1024.0);
                if log.delay_debt >= 0.001 {
                    // Pay the debt in one wait; a finished flush or compaction ends it early.
                    let secs = log.delay_debt.min(0.1);
                    log.delay_debt -= secs;
                    let start = Instant::now();
                    let (guard, _) = self
                        .bg_cv
                        .wait_timeout(state, Duration::from_secs_f64(secs))
                        .unwrap_or_else(|e| e.into_inner());
                    state = guard;
                    Stats::add(
                        &self.stats.slowdown_micros,
                        start.elapsed().as_micros() as u64,
                    );
                }
            }
            drop(state);
            if !mem_full {
                return Ok(());
            }
            return self.freeze_memtable(log);
        }
    }

    /// Replace the active memtables that hold writes, and their WAL, with fresh ones and
    /// queue the old ones for flushing. Called with `log` held.
    pub(crate) fn freeze_memtable(&self, log: &mut LogState) -> Result<()> {
        if log.mems.is_empty() {
            return Ok(());
        }
        // The old WAL is neither synced nor closed here: both wait on the disk or the page
        // tables, and this runs under the log lock with every writer behind it. Instead the
        // new WAL begins by naming the old one and its length (`LogWriter::following`; in
        // front of its first record, so an unused WAL stays empty). Should a power loss keep
        // some of the new WAL's bytes but not all of the old one's, recovery sees the old
        // WAL end short of that length and stops there: a prefix, not a hole. A sync write
        // syncs the old WALs before its own (`sync_older_wals`).
        let new_id = lock(&self.state).versions.new_file_id();
        let path = wal_path(&self.dir, new_id);
        let file = self.fs.create_log(&path).map_err(|e| self.poison(e))?;
        let new_wal = LogWriter::following(file, &log.wal, log.wal_id.0);
        let old_wal = std::mem::replace(&mut log.wal, new_wal);
        // An empty memtable stays active: it holds nothing of the old WAL.
        let mut frozen = Vec::new();
        let mut fresh = Vec::new();
        for slot in log.mems.slots() {
            if slot.mem.is_empty() {
                fresh.push(slot.clone());
            } else {
                fresh.push(MemSlot {
                    mem: Arc::new(MemTable::with_capacity(slot.write_buffer_size)),
                    ..slot.clone()
                });
                frozen.push(slot.clone());
            }
        }
        log.mems = MemSet::new(fresh);
        let old_id = std::mem::replace(&mut log.wal_id, new_id);
        log.unlogged_writes = false;
        log.older_wals_unsynced = true;

        let mut state = lock(&self.state);
        let changed: Vec<KeyspaceId> = frozen.iter().map(|slot| slot.keyspace).collect();
        let start_seq = std::mem::replace(&mut state.active_start, log.last_seq.next());
        state.imm.push_back(Arc::new(ImmMemTable {
            mems: MemSet::new(frozen),
            start_seq,
            wal_id: old_id,
            next_wal_id: new_id,
            wal: Mutex::new(Some(old_wal)),
        }));
        state.active = log.mems.clone();
        for ks in changed {
            self.install_super_version(&state, ks);
        }
        self.publish_pressure(&state);
        self.bg_cv.notify_all();
        Ok(())
    }

    /// Make every write that went through the WAL durable, as a sync write does, without
    /// writing: the older WALs first, then the active one. A failure poisons the database,
    /// as a sync write's does.
    pub(crate) fn sync_wal(&self) -> Result<()> {
        self.check_writable()?;
        let mut log = lock(&self.log);
        // As in `flush`: a close that took the log lock first has synced already.
        self.check_open()?;
        let sync = Timer::start();
        if let Err(e) = self.sync_older_wals(&mut log).and_then(|()| log.wal.sync()) {
            return Err(self.poison(e));
        }
        sync.stop(|p| &mut p.write_wal_sync_nanos);
        Stats::add_serialized(&self.stats.wal_syncs, 1);
        Ok(())
    }

    /// Make the WALs of the frozen memtables durable, and the active WAL's directory entry,
    /// so that a sync of the active WAL makes every write before it durable too. Nothing to
    /// do after the first time following a switch.
    pub(crate) fn sync_older_wals(&self, log: &mut LogState) -> Result<()> {
        if !log.older_wals_unsynced {
            return Ok(());
        }
        let frozen: Vec<Arc<ImmMemTable>> = lock(&self.state).imm.iter().cloned().collect();
        for imm in frozen {
            // `None`: flushed, its writes are in an SSTable already.
            if let Some(wal) = lock(&imm.wal).as_mut() {
                wal.sync()?;
            }
        }
        self.fs.sync_dir(&self.dir)?;
        log.older_wals_unsynced = false;
        Ok(())
    }

    pub(crate) fn flush(&self) -> Result<()> {
        self.check_writable()?;
        let target = {
            let mut log = lock(&self.log);
            // As in `commit_locked`: a close that took the log lock first has frozen
            // what it will flush, and the flush thread may have exited since.
            self.check_open()?;
            self.freeze_memtable(&mut log)?;
            log.wal_id
        };
        // Wait until every memtable frozen before ours is flushed. (A close after this
        // point still has the flush thread drain every frozen memtable before it exits.)
        let mut state = lock(&self.state);
        loop {
            if let Some(why) = &state.bg_error {
                return Err(Error::Poisoned(why.clone()));
            }
            if state.imm.front().is_none_or(|m| m.next_wal_id > target) {
                return Ok(());
            }
            state = self.bg_cv.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// How far `value` is between `soft` (0) and `hard` (1): 0 below `soft`, approaching 1
/// near `hard`.
fn pressure(value: usize, soft: usize, hard: usize) -> f64 {
    if value < soft || hard <= soft {
        return 0.0;
    }
    ((value - soft + 1) as f64 / (hard - soft + 1) as f64).min(0.95)
}

/// The writers that join the leader's group: in queue order, until the size cap, a
/// different durability mode, or a sync writer behind a non-sync leader.
fn build_group(queue: &VecDeque<Arc<Writer>>) -> Vec<Arc<Writer>> {
    let mut group = Vec::new();
    let Some(leader) = queue.front() else {
        return group;
    };
    let leader_bytes = leader.batch.approximate_size();
    let cap = if leader_bytes <= SMALL_BATCH_BYTES / 8 {
        leader_bytes + SMALL_BATCH_BYTES
    } else {
        MAX_GROUP_BYTES
    };
    let mut bytes = 0;
    for w in queue {
        let size = w.batch.approximate_size();
        let compatible = w.opts.disable_wal == leader.opts.disable_wal
            && (!w.opts.sync || leader.opts.sync)
            && w.condition.is_none()
            && leader.condition.is_none();
        if !group.is_empty() && (!compatible || bytes + size > cap) {
            break;
        }
        bytes += size;
        group.push(Arc::clone(w));
    }
    group
}
