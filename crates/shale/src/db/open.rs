//! Opening a database: lock, replay the manifest, open the live SSTables, replay the WALs
//! at or above the manifest's log number, save what they held as L0 SSTables, start a fresh
//! manifest and WAL, and delete files nothing refers to.
//!
//! Every step before the switch of CURRENT only adds files, so a crash anywhere during
//! open leaves the previous state intact: the next open starts over from the old manifest
//! and WALs, and removes the orphans this attempt left.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Condvar, Mutex};

use super::replay::{check_oldest_wal, top_up, Recovery, WalSource};
use super::state::{DbInner, DbState, LogState, Pressure};
use super::stats::Stats;
use super::super_version::{SuperVersion, SuperVersionCell};
use super::tree::{MemSet, MemSlot, Tree};
use crate::error::{Error, Result};
use crate::filename::{self, wal_path, FileKind};
use crate::fs::{FileLock, FileSystem};
use crate::key::SeqNo;
use crate::keyspace::{KeyspaceId, DEFAULT_NAME};
use crate::memtable::MemTable;
use crate::options::Options;
use crate::rate_limit::RateLimiter;
use crate::sst::BlockCache;
use crate::version::purge::Purger;
use crate::version::table_cache::TableCache;
use crate::version::KeyspaceDef;
use crate::version::{FileId, FileMeta, Level, RecoveredManifest, TableFile, Version, VersionSet};
use crate::wal::{LogReader, LogWriter};

/// How many times a read-only open starts over after a file it was about to read was
/// deleted by the database's writer. A try after the first opens only the tables that are
/// new since the last, so it is short; a writer that flushes and compacts every few
/// milliseconds on a loaded machine (`tests/engine/read_only.rs`) made 10 tries too few.
const READ_ONLY_TRIES: usize = 100;

pub(crate) fn open(dir: &Path, opts: Options) -> Result<Arc<DbInner>> {
    let mut opened = Opened::new(dir, &opts);
    if !opts.read_only {
        return open_once(dir, opts, &mut opened);
    }
    // A writer may flush a WAL, compact a table or roll the manifest away between this
    // open's reading the manifest and its reading that file: the state read is then stale,
    // and another try reads the new one, opening only the tables the last try did not.
    let mut tries = 1;
    loop {
        match open_once(dir, opts.clone(), &mut opened) {
            Err(Error::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound && tries < READ_ONLY_TRIES =>
            {
                tries += 1;
            }
            opened => return opened,
        }
    }
}

/// The caches an open fills, kept from one try of a read-only open to the next.
struct Opened {
    cache: Arc<BlockCache>,
    purger: Arc<Purger>,
    table_cache: Arc<TableCache>,
    /// The tables opened so far by file number. A table is immutable and its number never
    /// reused, so one opened by an earlier try serves a later try whose manifest lists it,
    /// even if the writer has deleted it since.
    tables: BTreeMap<FileId, Arc<TableFile>>,
}

impl Opened {
    fn new(dir: &Path, opts: &Options) -> Opened {
        let cache = Arc::new(BlockCache::new(opts.cache_size, opts.block_size));
        let purger = Arc::new(Purger::default());
        let table_cache = Arc::new(TableCache::new(
            Arc::clone(&opts.fs),
            dir.to_owned(),
            Arc::clone(&cache),
            opts.max_open_files,
            opts.mmap_reads,
            Arc::clone(&purger),
        ));
        Opened {
            cache,
            purger,
            table_cache,
            tables: BTreeMap::new(),
        }
    }
}

/// One try of [`open`], in the steps docs/architecture.md numbers ("Recovery").
fn open_once(dir: &Path, opts: Options, opened: &mut Opened) -> Result<Arc<DbInner>> {
    // A read-only open reads the WALs before the manifest (see [`WalSource`]).
    let mut wals = match opts.read_only && opts.fs.exists(dir) {
        true => WalSource::read_all(opts.fs.as_ref(), dir)?,
        false => WalSource::Directory,
    };
    // Steps 1 to 3: options, directory, lock, CURRENT and the manifest.
    let (lock, mut state) = lock_and_load(dir, &opts, &mut wals)?;
    let fs = Arc::clone(&opts.fs);
    let stats = Stats::default();
    let cache = Arc::clone(&opened.cache);
    let purger = Arc::clone(&opened.purger);
    let table_cache = Arc::clone(&opened.table_cache);
    // Step 4: the SSTables; steps 5 and 6: the WALs, saved to L0 (kept in memory when
    // read-only).
    let mut tables = open_tables(&table_cache, &state.files, &mut opened.tables)?;
    let recovery = Recovery {
        fs: fs.as_ref(),
        dir,
        opts: &opts,
        tables: &table_cache,
        kept: Vec::new(),
    };
    let replayed = recovery.replay_wals(&mut state, &mut tables, &stats, wals)?;
    // Steps 7 to 9: a fresh WAL and manifest, CURRENT switched, obsolete files deleted.
    let last_seq = state.last_seq;
    let defs: Vec<KeyspaceDef> = state.keyspaces.values().cloned().collect();
    let (wal, wal_id, versions) = start_log(dir, &opts, state, versions_by_keyspace(tables))?;
    // Step 10: one tree and one memtable per keyspace, over its version.
    let start = SeqNo(last_seq.0 + 1);
    let (trees, mems) = build_trees(&opts, &defs, &versions, &replayed, start, &purger);
    let default = match trees.get(&KeyspaceId::DEFAULT) {
        Some(tree) => Arc::clone(tree),
        None => unreachable!("build_trees makes the default keyspace's tree"),
    };
    let inner = Arc::new(DbInner {
        dir: dir.to_owned(),
        fs,
        lock_file: Mutex::new(lock),
        writers: Mutex::default(),
        writers_queued: AtomicUsize::new(0),
        log: Mutex::new(LogState::new(wal, wal_id, mems.clone(), last_seq)),
        state: Mutex::new(DbState::new(versions, mems, trees, start)),
        bg_cv: Condvar::new(),
        default,
        cache,
        tables: table_cache,
        purger,
        rate_limiter: Arc::new(RateLimiter::new(opts.rate_limit_bytes_per_sec)),
        visible_seq: AtomicU64::new(last_seq.0),
        pressure: Pressure::default(),
        snapshots: Arc::default(),
        closed: AtomicBool::new(false),
        stats,
        has_hooks: AtomicBool::new(false),
        hook_list: std::sync::RwLock::new(Arc::from(Vec::new())),
        opts,
    });
    inner.publish_pressure(&crate::sync::lock(&inner.state));
    Ok(inner)
}

/// The tables of step 4 (and those step 6 wrote), as one version per keyspace.
fn versions_by_keyspace(tables: Vec<(Level, Arc<TableFile>)>) -> BTreeMap<KeyspaceId, Version> {
    let mut by_keyspace: BTreeMap<KeyspaceId, Vec<(Level, Arc<TableFile>)>> = BTreeMap::new();
    for (level, file) in tables {
        by_keyspace
            .entry(file.meta.keyspace)
            .or_default()
            .push((level, file));
    }
    by_keyspace
        .into_iter()
        .map(|(ks, files)| (ks, Version::from_files(files)))
        .collect()
}

/// Step 10: a tree per keyspace, the default's first, each with an empty memtable (its
/// options applied) and a super version over its current version; a read-only open keeps
/// what the WALs held (`replayed`) as its immutable memtables, newest first. Returns the
/// trees and the set of their active memtables.
fn build_trees(
    opts: &Options,
    defs: &[KeyspaceDef],
    versions: &VersionSet,
    replayed: &[(KeyspaceId, Arc<MemTable>)],
    start_seq: SeqNo,
    purger: &Arc<Purger>,
) -> (BTreeMap<KeyspaceId, Arc<Tree>>, MemSet) {
    let named = defs.iter().map(|def| {
        let mut tree_opts = def.options.apply_to(opts);
        tree_opts.compaction_filter = opts.keyspace_filter(&def.name);
        (def.id, def.name.clone(), tree_opts)
    });
    let default = (KeyspaceId::DEFAULT, DEFAULT_NAME.to_owned(), opts.clone());
    let mut trees = BTreeMap::new();
    let mut slots = Vec::new();
    for (id, name, tree_opts) in std::iter::once(default).chain(named) {
        let mem = Arc::new(MemTable::with_capacity(tree_opts.write_buffer_size));
        let imm = replayed
            .iter()
            .rev()
            .filter(|(ks, _)| *ks == id)
            .map(|(_, m)| Arc::clone(m))
            .collect();
        let sv = SuperVersion {
            mem: Arc::clone(&mem),
            imm,
            version: versions.version(id).unwrap_or_default(),
            start_seq,
            purger: Arc::clone(purger),
        };
        slots.push(MemSlot {
            keyspace: id,
            mem,
            write_buffer_size: tree_opts.write_buffer_size,
        });
        let tree = Tree::new(id, name, tree_opts, SuperVersionCell::new(Arc::new(sv)));
        trees.insert(id, Arc::new(tree));
    }
    (trees, MemSet::new(slots))
}

/// Steps 1 to 3 of an open: validate the options, create the directory if allowed, take
/// the lock (not when read-only), and load the state CURRENT and the manifest name, or a
/// new database's empty one.
fn lock_and_load(
    dir: &Path,
    opts: &Options,
    wals: &mut WalSource,
) -> Result<(Option<Box<dyn FileLock>>, RecoveredManifest)> {
    opts.validate().map_err(Error::InvalidOptions)?;
    let fs = opts.fs.as_ref();
    let read_only = opts.read_only;
    if opts.create_if_missing && !read_only {
        fs.create_dir_all(dir)?;
    }
    if !fs.exists(dir) {
        return Err(Error::invalid(format!(
            "database directory {} does not exist{}",
            dir.display(),
            if read_only {
                ""
            } else {
                " (create_if_missing is off)"
            }
        )));
    }
    let lock = match read_only {
        true => None,
        false => Some(fs.lock(&dir.join(filename::LOCK))?),
    };
    let state = if fs.exists(&dir.join(crate::version::CURRENT_FILE)) {
        if opts.error_if_exists {
            return Err(Error::invalid(format!(
                "database {} already exists (error_if_exists is on)",
                dir.display()
            )));
        }
        let state = RecoveredManifest::load(fs, dir)?;
        match wals {
            WalSource::Directory => check_oldest_wal(fs, dir, &state)?,
            WalSource::Read(read) => top_up(fs, dir, &state, read)?,
        }
        state
    } else if opts.create_if_missing && !read_only {
        refuse_orphaned_data(fs, dir)?;
        RecoveredManifest {
            next_file_number: FileId(2),
            manifest_id: FileId(1),
            ..RecoveredManifest::default()
        }
    } else {
        return Err(Error::invalid(format!(
            "no database in {} (create_if_missing is off)",
            dir.display()
        )));
    };
    Ok((lock, state))
}

/// Steps 7 to 9 of an open: a fresh WAL (every older one is now obsolete), a new manifest
/// holding `state` with CURRENT switched to it, and the files nothing names deleted. A
/// read-only open writes none of it: its WAL and manifest writers refuse every append.
fn start_log(
    dir: &Path,
    opts: &Options,
    mut state: RecoveredManifest,
    built: BTreeMap<KeyspaceId, Version>,
) -> Result<(LogWriter, FileId, VersionSet)> {
    let fs = &opts.fs;
    if opts.read_only {
        let versions = VersionSet::read_only(Arc::clone(fs), dir, state, built);
        let wal = LogWriter::new(Box::new(crate::fs::ReadOnlyFile));
        return Ok((wal, versions.log_number(), versions));
    }
    let wal_id = state.next_file_number;
    state.next_file_number = FileId(wal_id.0 + 1);
    state.log_number = wal_id;
    let wal = LogWriter::new(fs.create_log(&wal_path(dir, wal_id))?);
    // Writes the new manifest and switches CURRENT (which syncs the directory, making the
    // new WAL's and SSTables' entries durable too).
    let versions = VersionSet::create(
        Arc::clone(fs),
        dir,
        state,
        built,
        opts.max_manifest_file_size,
    )?;
    remove_obsolete_files(fs.as_ref(), dir, &versions, wal_id)?;
    Ok((wal, wal_id, versions))
}

/// With CURRENT missing, a new database would be created here, and its first cleanup would
/// delete every SSTable and WAL as garbage. Refuse instead if any of them holds data: CURRENT
/// was lost, and `Db::repair` can rebuild the database from them. (A crash during a
/// database's first open leaves only an empty WAL and a manifest, and open goes on.)
fn refuse_orphaned_data(fs: &dyn FileSystem, dir: &Path) -> Result<()> {
    let mut holding = Vec::new();
    for name in fs.list(dir)? {
        let holds_data = match filename::parse(&name) {
            Some(FileKind::Table(_)) => true,
            Some(FileKind::Wal(_)) => {
                let path = dir.join(&name);
                let data = fs.read_all(&path)?;
                !matches!(LogReader::new(&data, &path).next_record(), Ok(None))
            }
            _ => false,
        };
        if holds_data {
            holding.push(name);
        }
    }
    holding.sort();
    match holding.first() {
        None => Ok(()),
        Some(first) => Err(Error::corruption(
            dir.join(crate::version::CURRENT_FILE),
            0,
            format!(
                "CURRENT is missing, but {} SSTable or WAL files hold data (the first:                  {first}); refusing to create a new database over them (Db::repair rebuilds                  the database from them)",
                holding.len()
            ),
        )),
    }
}

/// Open every table of `files` (those in `opened` already are reused): a missing or
/// damaged file is found now, not on a read.
fn open_tables(
    tables: &Arc<TableCache>,
    files: &BTreeMap<FileId, (Level, FileMeta)>,
    opened: &mut BTreeMap<FileId, Arc<TableFile>>,
) -> Result<Vec<(Level, Arc<TableFile>)>> {
    let mut out = Vec::with_capacity(files.len());
    for (id, (level, meta)) in files {
        let file = match opened.get(id) {
            Some(file) => Arc::clone(file),
            None => {
                let file = Arc::new(TableFile::new(meta.clone(), Arc::clone(tables)));
                file.table()?;
                opened.insert(*id, Arc::clone(&file));
                file
            }
        };
        out.push((*level, file));
    }
    Ok(out)
}

/// Delete WALs below the log number, SSTables no version refers to, old manifests and
/// temporary files. Called after the new manifest is durable.
pub(super) fn remove_obsolete_files(
    fs: &dyn FileSystem,
    dir: &Path,
    versions: &VersionSet,
    log_number: FileId,
) -> Result<()> {
    let live: std::collections::HashSet<FileId> = versions.live_files().collect();
    for name in fs.list(dir)? {
        let obsolete = match filename::parse(&name) {
            Some(FileKind::Wal(id)) => id < log_number,
            Some(FileKind::Table(id)) => !live.contains(&id),
            Some(FileKind::Manifest(id)) => id != versions.manifest_id(),
            Some(FileKind::Temp(_)) => true,
            Some(FileKind::Current | FileKind::Lock) | None => false,
        };
        if obsolete {
            fs.remove(&dir.join(&name))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{self, WriteBatch};
    use crate::db::replay::continues;
    use crate::fs::MemFs;
    use crate::key::SeqNo;
    use crate::wal::Predecessor;
    use crate::wal::HEADER_LEN;
    use crate::Db;

    /// An empty database on a `MemFs` in `/db`, after one handle put `writes` and closed:
    /// its WAL 2 holds them. Returns the file system and the options that open it.
    fn closed_with_wal2(writes: &[(&str, &str)]) -> (MemFs, Options) {
        let fs = MemFs::new();
        let opts = Options {
            fs: Arc::new(fs.clone()),
            ..Options::default()
        };
        let db = Db::open(Path::new("/db"), opts.clone()).unwrap();
        for (k, v) in writes {
            db.put(k, v).unwrap();
        }
        db.close().unwrap();
        (fs, opts)
    }

    /// A new WAL `id` whose predecessor fragment names WAL 2 at its present length.
    fn wal_following_wal2(fs: &MemFs, dir: &Path, id: u64) -> LogWriter {
        let wal2 = fs.read_all(&wal_path(dir, FileId(2))).unwrap();
        // A stand-in for WAL 2's writer: a log of the same length.
        let scratch = dir.join("scratch");
        let mut stand_in = LogWriter::new(fs.create_log(&scratch).unwrap());
        stand_in
            .add_record(&[&vec![0u8; wal2.len() - HEADER_LEN]])
            .unwrap();
        let wal = LogWriter::following(
            fs.create_log(&wal_path(dir, FileId(id))).unwrap(),
            &stand_in,
            2,
        );
        drop(stand_in);
        fs.remove(&scratch).unwrap();
        wal
    }

    /// A database whose WAL 2 holds `a` and `b`, followed by an empty WAL 3 (the WAL was off
    /// while it was current) and a WAL 4 that holds `c` and names WAL 2, the last one with
    /// records, as its predecessor; with WAL 2 cut by `cut` bytes before the reopen.
    fn reopen_with_chain(cut: usize) -> [Option<Vec<u8>>; 3] {
        let (fs, opts) = closed_with_wal2(&[("a", "1"), ("b", "2")]);
        let dir = Path::new("/db");
        let wal2 = fs.read_all(&wal_path(dir, FileId(2))).unwrap();
        let wal3 = wal_following_wal2(&fs, dir, 3);
        let mut wal4 =
            LogWriter::following(fs.create_log(&wal_path(dir, FileId(4))).unwrap(), &wal3, 3);
        let mut c = WriteBatch::new();
        c.put("c", "3");
        wal4.add_record(&[&batch::encode_header(SeqNo(3), 1), c.body()])
            .unwrap();
        drop((wal3, wal4));

        let mut w = fs.create_log(&wal_path(dir, FileId(2))).unwrap();
        w.append(&wal2[..wal2.len() - cut]).unwrap();
        drop(w);

        let db = Db::open(dir, opts).unwrap();
        let got = |k: &str| db.get(k).unwrap();
        [got("a"), got("b"), got("c")]
    }

    #[test]
    fn a_wal_numbered_past_the_manifest_counter_is_replayed_once() {
        let (fs, opts) = closed_with_wal2(&[("a", "1")]);
        let dir = Path::new("/db");
        // A crash can leave a WAL numbered past the manifest's next file number (4 here):
        // a WAL's number is logged only with the next edit. Make WAL 50 follow WAL 2.
        let mut wal50 = wal_following_wal2(&fs, dir, 50);
        let mut b = WriteBatch::new();
        b.put("b", "old");
        wal50
            .add_record(&[&batch::encode_header(SeqNo(2), 1), b.body()])
            .unwrap();
        drop(wal50);

        let db = Db::open(dir, opts.clone()).unwrap();
        assert_eq!(db.get("b").unwrap(), Some(b"old".to_vec()));
        assert!(
            !fs.list(dir).unwrap().contains(&"000050.wal".to_owned()),
            "WAL 50 is in a table now: obsolete"
        );
        db.put("b", "new").unwrap();
        db.flush().unwrap();
        db.compact_range(None, None).unwrap();
        db.close().unwrap();
        drop(db);
        // Replayed a second time, WAL 50 would put the old value in L0, above the new one.
        let db = Db::open(dir, opts).unwrap();
        assert_eq!(db.get("b").unwrap(), Some(b"new".to_vec()));
        assert_eq!(db.get("a").unwrap(), Some(b"1".to_vec()));
    }

    #[test]
    fn replay_skips_an_empty_wal_and_stops_where_the_named_predecessor_came_back_short() {
        let some = |v: &str| Some(v.as_bytes().to_vec());
        // Whole: WAL 4 continues WAL 2 across the empty WAL 3.
        assert_eq!(reopen_with_chain(0), [some("1"), some("2"), some("3")]);
        // WAL 2 lost its last record: `c` came after it, so it goes too (a prefix).
        assert_eq!(reopen_with_chain(1), [some("1"), None, None]);
    }

    #[test]
    fn a_wal_continues_only_a_predecessor_replayed_to_its_named_length() {
        let named = |wal, length| Some(Predecessor { wal, length });
        let log_number = FileId(10);
        // The first WAL after an open names nothing.
        assert!(continues(None, None, log_number));
        // Its predecessor is in an SSTable already.
        assert!(continues(named(9, 500), None, log_number));
        // Replayed whole, or it had grown no further.
        assert!(continues(
            named(10, 500),
            Some((FileId(10), 500)),
            log_number
        ));
        // Cut short by a power loss: a hole would follow.
        assert!(!continues(
            named(10, 500),
            Some((FileId(10), 499)),
            log_number
        ));
        // The named WAL is missing, or came back empty (not replayed at all).
        assert!(!continues(
            named(11, 500),
            Some((FileId(10), 900)),
            log_number
        ));
        assert!(!continues(named(10, 500), None, log_number));
    }
}
