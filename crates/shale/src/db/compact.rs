//! Background compaction: threads that pick a task (under the state lock, cheap), run it
//! unlocked, and install the result (a manifest edit and a pointer swap under the lock).
//!
//! Input files are marked busy in `DbState::compacting` from pick to install, which keeps
//! concurrent tasks disjoint (see `compaction/picker/mod.rs`). Replaced files are deleted after
//! the new version is installed; readers still holding an older version keep them open.

use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Instant;

use super::state::{DbInner, DbState};
use super::stats::Stats;
use super::tree::Tree;
use crate::compaction::{
    run_compaction, CompactionPolicy, CompactionTask, DropPolicy, InFlight, LevelFile,
};
use crate::error::{Error, Result};
use crate::filename::table_path;
use crate::fs::WritableFile;
use crate::iter::{InternalIterator, MergingIter};
use crate::keyspace::KeyspaceId;
use crate::options::Options;
use crate::range_del::RangeDels;
use crate::rate_limit::RateLimitedFile;
use crate::sst::TableOptions;
use crate::sync::lock;
use crate::version::LevelIter;
use crate::version::{FileId, Level, TableFile, Version, VersionEdit, NUM_LEVELS};

/// Start compaction thread number `i`.
pub(crate) fn spawn(db: &Arc<DbInner>, i: usize) -> Result<JoinHandle<()>> {
    let db = Arc::clone(db);
    std::thread::Builder::new()
        .name(format!("shale-compact-{i}"))
        .spawn(move || compaction_loop(&db))
        .map_err(|e| Error::io("spawn compaction thread", Path::new(""), e))
}

/// The compaction policy of a tree built with `opts` (its keyspace's options).
pub(crate) fn policy(opts: &Options) -> CompactionPolicy {
    CompactionPolicy {
        level0_trigger: opts.level0_compaction_trigger,
        base_bytes: opts.max_bytes_for_level_base,
        multiplier: opts.level_size_multiplier,
        rewrite_into: std::array::from_fn(|level| {
            level > 0 && opts.compression_for_level(level) != opts.compression_for_level(level - 1)
        }),
    }
}

/// The policy's view of a version.
fn level_view(version: &Version) -> Vec<Vec<LevelFile<'_>>> {
    (0..NUM_LEVELS)
        .map(|l| {
            version
                .files(l)
                .iter()
                .map(|f| LevelFile {
                    id: f.meta.id,
                    size: f.meta.size,
                    smallest: f.meta.smallest.user_key(),
                    largest: f.meta.largest.user_key(),
                })
                .collect()
        })
        .collect()
}

/// A `compact_range` in progress, counted in `DbState::manual_compactions` until it ends
/// (a panic included), so that `close` waits for it.
struct ManualCompaction<'a>(&'a DbInner);

impl Drop for ManualCompaction<'_> {
    fn drop(&mut self) {
        lock(&self.0.state).manual_compactions -= 1;
        self.0.bg_cv.notify_all();
    }
}

fn compaction_loop(db: &DbInner) {
    loop {
        let mut state = lock(&db.state);
        let task = loop {
            if state.bg_error.is_some() || state.shutting_down {
                return;
            }
            if let Some(picked) = pick(&state) {
                break picked;
            }
            state = db.bg_cv.wait(state).unwrap_or_else(|e| e.into_inner());
        };
        let (tree, task) = task;
        mark(&mut state, tree.id, &task);
        drop(state);
        // A failure poisons the database inside `execute`.
        let _ = execute(db, &tree, &task);
        db.bg_cv.notify_all();
    }
}

/// The next compaction of any keyspace: the trees with the most L0 files are asked first.
fn pick(state: &DbState) -> Option<(Arc<Tree>, CompactionTask)> {
    let mut trees: Vec<(usize, &Arc<Tree>, Arc<Version>)> = state
        .trees
        .values()
        .filter_map(|tree| {
            let version = state.versions.version(tree.id)?;
            Some((version.files(0).len(), tree, version))
        })
        .collect();
    trees.sort_by_key(|(l0, tree, _)| (std::cmp::Reverse(*l0), tree.id));
    trees.into_iter().find_map(|(_, tree, version)| {
        let view = level_view(&version);
        let busy = TreeInFlight { state, ks: tree.id };
        let pointers = state
            .compact_pointers
            .get(&tree.id)
            .map_or(&[][..], Vec::as_slice);
        let task = policy(&tree.opts()).pick(&view, &busy, pointers)?;
        Some((Arc::clone(tree), task))
    })
}

/// The running compactions, as the picker of keyspace `ks` sees them.
struct TreeInFlight<'a> {
    state: &'a DbState,
    ks: KeyspaceId,
}

impl InFlight for TreeInFlight<'_> {
    fn busy(&self, id: FileId) -> bool {
        self.state.compacting.contains(&id)
    }
    fn writes_into(&self, level: usize, smallest: &[u8], largest: &[u8]) -> bool {
        self.state
            .compaction_outputs
            .get(&self.ks)
            .is_some_and(|outputs| outputs.overlap(level, smallest, largest))
    }
}

/// `task` of keyspace `ks` starts: its files are busy and its output range taken until it
/// ends.
fn mark(state: &mut DbState, ks: KeyspaceId, task: &CompactionTask) {
    state.compacting.extend(task.all_inputs());
    state.compaction_outputs.entry(ks).or_default().add(task);
}

/// Unmark the files and the output range of `task` of `tree`: other compactions may
/// take them again.
fn release(state: &mut DbState, tree: &Tree, task: &CompactionTask) {
    for id in task.all_inputs() {
        state.compacting.remove(&id);
    }
    if let Some(outputs) = state.compaction_outputs.get_mut(&tree.id) {
        outputs.remove(task);
        if outputs.is_empty() {
            state.compaction_outputs.remove(&tree.id);
        }
    }
}

/// Run `task` of `tree` (already marked busy) and install its result; unmark its files
/// either way. A failure poisons the database; a keyspace dropped meanwhile drops the
/// result.
pub(crate) fn execute(db: &DbInner, tree: &Tree, task: &CompactionTask) -> Result<()> {
    let start = Instant::now();
    let result = run(db, tree, task);
    let mut state = lock(&db.state);
    release(&mut state, tree, task);
    if state.versions.version(tree.id).is_none() {
        if let Ok((_, added, _)) = result {
            for (_, file) in added.iter().filter(|_| !task.trivial_move) {
                file.mark_obsolete();
            }
        }
        return Ok(());
    }
    let installed = result.and_then(|(edit, added, deleted)| {
        state.log_and_apply(edit, &added)?;
        Ok((added, deleted))
    });
    let (added, deleted) = match installed {
        Ok(done) => done,
        Err(e) => {
            // Background or manual (`compact_range`), a failed compaction refuses writes
            // from now on, as a failed flush does: the disk may be full or failing, and
            // the manifest may end in a partial record.
            if state.bg_error.is_none() {
                state.bg_error = Some(format!("compaction failed: {e}"));
            }
            db.publish_pressure(&state);
            return Err(e);
        }
    };
    let pointers = state
        .compact_pointers
        .entry(tree.id)
        .or_insert_with(|| vec![Vec::new(); NUM_LEVELS]);
    if let Some(p) = pointers.get_mut(task.level) {
        *p = task.largest.clone();
    }
    db.install_super_version(&state, tree.id);
    db.publish_pressure(&state);
    db.tune_rate_limit(&mut state);
    let written: u64 = added.iter().map(|(_, f)| f.meta.size).sum();
    let secs = start.elapsed().as_secs_f64().max(1e-6);
    if !task.trivial_move {
        state.compaction_bytes_per_sec =
            0.7 * state.compaction_bytes_per_sec + 0.3 * (written as f64 / secs);
    }
    drop(state);
    Stats::add(&db.stats.compactions, 1);
    Stats::add(&db.stats.compaction_bytes_written, written);
    Stats::add(
        &db.stats.compaction_micros,
        start.elapsed().as_micros() as u64,
    );
    if task.trivial_move {
        Stats::add(&db.stats.trivial_moves, 1);
    }
    // The replaced files are deleted when the last version that lists them is dropped:
    // readers that started before this install may still be reading them.
    for file in deleted {
        file.mark_obsolete();
    }
    Ok(())
}

type Installable = (
    VersionEdit,
    Vec<(Level, Arc<TableFile>)>,
    Vec<Arc<TableFile>>,
);

/// Do the I/O of `task` of `tree`: the edit to install, the new files, the files it
/// replaces.
fn run(db: &DbInner, tree: &Tree, task: &CompactionTask) -> Result<Installable> {
    let version = lock(&db.state)
        .versions
        .version(tree.id)
        .ok_or_else(|| Error::invalid(format!("keyspace {} was dropped", tree.name)))?;
    let find = |level: usize, ids: &[FileId]| -> Vec<Arc<TableFile>> {
        version
            .files(level)
            .iter()
            .filter(|f| ids.contains(&f.meta.id))
            .cloned()
            .collect()
    };
    let inputs = find(task.level, &task.inputs);
    let next_inputs = find(task.output_level, &task.next_inputs);
    let out_level = Level(task.output_level as u8);
    let mut edit = VersionEdit::default();
    for f in &inputs {
        edit.deleted_files
            .push((Level(task.level as u8), f.meta.id));
    }
    for f in &next_inputs {
        edit.deleted_files.push((out_level, f.meta.id));
    }

    if task.trivial_move {
        let added: Vec<(Level, Arc<TableFile>)> =
            inputs.iter().map(|f| (out_level, Arc::clone(f))).collect();
        edit.new_files = added.iter().map(|(l, f)| (*l, f.meta.clone())).collect();
        return Ok((edit, added, Vec::new()));
    }

    let read: u64 = inputs.iter().chain(&next_inputs).map(|f| f.meta.size).sum();
    Stats::add(&db.stats.compaction_bytes_read, read);
    let files = merge(db, tree, task, &version, &inputs, &next_inputs)?;
    db.fs.sync_dir(&db.dir)?;
    let added: Vec<(Level, Arc<TableFile>)> = files
        .into_iter()
        .map(|f| (out_level, Arc::new(f)))
        .collect();
    edit.new_files = added.iter().map(|(l, f)| (*l, f.meta.clone())).collect();
    let deleted = inputs.iter().chain(&next_inputs).cloned().collect();
    Ok((edit, added, deleted))
}

/// Merge `inputs` (of `task.level`) and `next_inputs` (of its output level) into new
/// tables of the output level, dropping what no reader can see and what the keyspace's
/// compaction filter removes; each new table opened (and so verified).
fn merge(
    db: &DbInner,
    tree: &Tree,
    task: &CompactionTask,
    version: &Version,
    inputs: &[Arc<TableFile>],
    next_inputs: &[Arc<TableFile>],
) -> Result<Vec<TableFile>> {
    let mut children: Vec<Box<dyn InternalIterator + Send>> = Vec::new();
    if task.level == 0 {
        for f in inputs {
            children.push(Box::new(f.table()?.iter_opt(false)));
        }
    } else {
        children.push(Box::new(LevelIter::new(inputs.to_vec(), false)));
    }
    children.push(Box::new(LevelIter::new(next_inputs.to_vec(), false)));
    let snapshots = db.snapshots.pinned();
    let deeper = |smallest: &[u8], largest: &[u8]| -> bool {
        (task.output_level + 1..NUM_LEVELS).all(|l| {
            version.files(l).iter().all(|f| {
                largest < f.meta.smallest.user_key() || smallest > f.meta.largest.user_key()
            })
        })
    };
    let range_dels = inputs_range_dels(inputs.iter().chain(next_inputs))?;
    let opts = tree.opts();
    let policy = DropPolicy {
        snapshots: &snapshots,
        is_bottommost: &deeper,
        range_dels: range_dels.as_ref(),
        // The keyspace's own filter (`Options::keyspace_filter`).
        filter: opts
            .compaction_filter
            .as_deref()
            .map(|f| (f, task.output_level)),
    };
    let mut next_file = || {
        let id = lock(&db.state).versions.new_file_id();
        (id, table_path(&db.dir, id))
    };
    let out = run_compaction(
        MergingIter::new(children),
        &policy,
        &|path: &Path| {
            let file = db.fs.create(path)?;
            Ok(
                Box::new(RateLimitedFile::new(file, Arc::clone(&db.rate_limiter)))
                    as Box<dyn WritableFile>,
            )
        },
        &|meta: crate::version::FileMeta| {
            let meta = crate::version::FileMeta {
                keyspace: tree.id,
                ..meta
            };
            let file = TableFile::new(meta, Arc::clone(&db.tables));
            file.table()?; // open (and so verify) the new table
            Ok(file)
        },
        TableOptions::for_level(&opts, task.output_level),
        opts.max_file_size,
        &mut next_file,
    )?;
    Stats::add(&db.stats.compaction_entries_dropped, out.entries_dropped);
    Ok(out.files)
}

/// The range tombstones of `files`, fragmented; `None` if they have none.
pub(crate) fn inputs_range_dels<'a>(
    files: impl Iterator<Item = &'a Arc<TableFile>>,
) -> Result<Option<RangeDels>> {
    let mut tombstones = Vec::new();
    for f in files.filter(|f| f.meta.range_dels) {
        if let Some(set) = f.table_ref()?.range_dels() {
            tombstones.extend(set.tombstones());
        }
    }
    Ok((!tombstones.is_empty()).then(|| RangeDels::new(&tombstones)))
}

impl DbInner {
    /// Block until no flush is pending and no compaction is running or needed.
    pub(crate) fn wait_idle(&self) -> Result<()> {
        self.wait_background()?;
        // Files the finished work replaced are deleted by now.
        self.purger.wait_idle();
        Ok(())
    }

    fn wait_background(&self) -> Result<()> {
        let mut state = lock(&self.state);
        loop {
            if let Some(why) = &state.bg_error {
                return Err(Error::Poisoned(why.clone()));
            }
            if state.shutting_down {
                return Err(Error::Closed); // the compaction threads have stopped
            }
            if state.imm.is_empty()
                && state.compacting.is_empty()
                && state.compaction_outputs.is_empty()
                && pick(&state).is_none()
            {
                return Ok(());
            }
            state = self.bg_cv.wait(state).unwrap_or_else(|e| e.into_inner());
        }
    }

    /// Compact every file overlapping `[begin, end]` (user keys; `None` is unbounded) down
    /// through the levels to the deepest one holding data, then rewrite that one in place,
    /// all in the calling thread. The files it replaced are deleted when it returns,
    /// unless a reader still uses them.
    pub(crate) fn compact_range(
        &self,
        tree: &Tree,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        {
            let mut state = lock(&self.state);
            if state.shutting_down {
                return Err(Error::Closed);
            }
            state.manual_compactions += 1;
        }
        let _running = ManualCompaction(self);
        let result = self.compact_range_levels(tree, begin, end);
        self.purger.wait_idle();
        result
    }

    fn compact_range_levels(
        &self,
        tree: &Tree,
        begin: Option<&[u8]>,
        end: Option<&[u8]>,
    ) -> Result<()> {
        self.flush()?;
        let policy = policy(&tree.opts());
        let lo = begin.unwrap_or(&[]);
        let mut level = 0;
        while level < NUM_LEVELS {
            let mut state = lock(&self.state);
            if let Some(why) = &state.bg_error {
                return Err(Error::Poisoned(why.clone()));
            }
            if state.shutting_down {
                return Err(Error::Closed);
            }
            let Some(version) = state.versions.version(tree.id) else {
                return Err(Error::invalid(format!(
                    "keyspace {} was dropped",
                    tree.name
                )));
            };
            let Some(deepest) = (0..NUM_LEVELS)
                .rev()
                .find(|&l| !version.files(l).is_empty())
            else {
                return Ok(());
            };
            if level > deepest {
                return Ok(());
            }
            let view = level_view(&version);
            let files = view.get(level).map_or(&[][..], Vec::as_slice);
            let max_key = files.iter().map(|f| f.largest).max().unwrap_or(&[]);
            let hi = end.unwrap_or(max_key);
            if !files.iter().any(|f| f.smallest <= hi && lo <= f.largest) {
                level += 1;
                continue;
            }
            let busy = TreeInFlight {
                state: &state,
                ks: tree.id,
            };
            let task = if level == 0 {
                // All of L0, whatever the range (see `pick_level0`).
                policy.pick_level0(&view, &busy)
            } else {
                policy.pick_manual(&view, level, (lo, hi), level >= deepest, &busy)
            };
            drop(view);
            let Some(task) = task else {
                // A background compaction holds some of these files: wait for it.
                let _state = self.bg_cv.wait(state).unwrap_or_else(|e| e.into_inner());
                continue;
            };
            mark(&mut state, tree.id, &task);
            drop(state);
            let result = execute(self, tree, &task);
            self.bg_cv.notify_all();
            result?;
            // The level is done once nothing in the range is left in it (or, for the bottom
            // level, after one rewrite).
            if level > 0 && level >= deepest {
                return Ok(());
            }
        }
        Ok(())
    }
}
