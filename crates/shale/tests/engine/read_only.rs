//! `Options::read_only`: handles beside a writer that take no lock, see the database as
//! of their open (WAL included, even one read while the writer appends to it), refuse every
//! write, and leave the directory untouched.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use shale::fs::{FileLock, FileSystem, MemFs, RandomAccessFile, WritableFile};
use shale::{Db, Error, Options, Result};

fn read_only() -> Options {
    Options {
        read_only: true,
        ..Options::default()
    }
}

fn small() -> Options {
    Options {
        write_buffer_size: 64 << 10,
        ..Options::default()
    }
}

fn contents(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.range::<&[u8]>(..)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// Every file of `dir` with its bytes.
fn files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (
                e.file_name().into_string().unwrap(),
                std::fs::read(e.path()).unwrap(),
            )
        })
        .collect()
}

#[test]
fn readers_beside_a_writer_see_its_state_as_of_their_open() {
    let dir = tempfile::tempdir().unwrap();
    let writer = Db::open(dir.path(), small()).unwrap();
    let mut model = BTreeMap::new();
    for i in 0..20_000u32 {
        let (k, v) = (format!("k{:05}", i % 7_000), format!("v{i}"));
        writer.put(&k, &v).unwrap();
        model.insert(k.into_bytes(), v.into_bytes());
    }
    writer.delete("k00001").unwrap();
    model.remove(&b"k00001"[..]);
    // Some of it only in the WAL.
    writer.put("wal-only", "yes").unwrap();
    model.insert(b"wal-only".to_vec(), b"yes".to_vec());

    let first = Db::open(dir.path(), read_only()).unwrap();
    let second = Db::open(dir.path(), read_only()).unwrap();
    assert_eq!(contents(&first), model);
    assert_eq!(
        second.get("wal-only").unwrap().as_deref(),
        Some(&b"yes"[..])
    );

    // The writer goes on, and its compaction deletes the files the readers opened.
    for i in 0..20_000u32 {
        writer.put(format!("k{:05}", i % 7_000), "later").unwrap();
    }
    writer.compact_range(None, None).unwrap();
    assert_eq!(contents(&first), model);
    assert_eq!(contents(&second), model);
    // A new reader sees the new state.
    let third = Db::open(dir.path(), read_only()).unwrap();
    assert_eq!(third.get("k00002").unwrap().as_deref(), Some(&b"later"[..]));
}

#[test]
fn a_read_only_handle_refuses_every_write() {
    let dir = tempfile::tempdir().unwrap();
    Db::open(dir.path(), Options::default())
        .unwrap()
        .put("k", "v")
        .unwrap();
    let db = Db::open(dir.path(), read_only()).unwrap();
    let refused = |r: shale::Result<()>| matches!(r, Err(Error::InvalidArgument(_)));
    assert!(refused(db.put("k", "w")));
    assert!(refused(db.delete("k")));
    assert!(refused(db.flush()));
    assert!(refused(db.compact_range(None, None)));
    assert!(refused(db.checkpoint(dir.path().join("copy"))));
    assert_eq!(db.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    db.close().unwrap();
}

#[test]
fn a_read_only_open_and_close_leave_the_directory_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open(dir.path(), small()).unwrap();
        for i in 0..5_000u32 {
            db.put(format!("k{i:05}"), format!("v{i}")).unwrap();
        }
        db.flush().unwrap();
        db.put("in-the-wal", "x").unwrap();
        // Dropped without a close: the WAL holds the last write.
    }
    let before = files(dir.path());
    let db = Db::open(dir.path(), read_only()).unwrap();
    assert_eq!(db.get("in-the-wal").unwrap().as_deref(), Some(&b"x"[..]));
    assert_eq!(db.get("k04999").unwrap().as_deref(), Some(&b"v4999"[..]));
    db.close().unwrap();
    assert_eq!(files(dir.path()), before);
}

#[test]
fn a_read_only_open_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    assert!(matches!(
        Db::open(&missing, read_only()),
        Err(Error::InvalidArgument(_))
    ));
    assert!(!missing.exists());
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    assert!(matches!(
        Db::open(&empty, read_only()),
        Err(Error::InvalidArgument(_))
    ));
    assert_eq!(std::fs::read_dir(&empty).unwrap().count(), 0);
}

/// Read-only opens race a writer that flushes and compacts all the time: each open must see
/// every write acknowledged before it began, and no write without the ones before it, however
/// the writer's deletes of WALs, tables and manifests fall between the open's reads.
#[test]
fn read_only_opens_racing_flushes_miss_no_acknowledged_write() {
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    let dir = tempfile::tempdir().unwrap();
    let writer = Arc::new(Db::open(dir.path(), small()).unwrap());
    let acked = Arc::new(AtomicU32::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let thread = {
        let (writer, acked, stop) = (writer.clone(), acked.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut i = 0u32;
            while !stop.load(Ordering::Relaxed) && i < 2_000_000 {
                writer.put(format!("k{i:08}"), [7u8; 100]).unwrap();
                i += 1;
                acked.store(i, Ordering::Release);
            }
        })
    };
    // Opens while the writer runs, at most 400 of them or 8 s (each open retries while the
    // writer deletes what it was about to read, so a loaded machine makes them slow).
    let deadline = Instant::now() + Duration::from_secs(8);
    let mut opens = 0;
    while opens < 400 && !thread.is_finished() && Instant::now() < deadline {
        let before = acked.load(Ordering::Acquire);
        let reader = Db::open(dir.path(), read_only()).unwrap();
        let keys: Vec<Vec<u8>> = reader
            .range::<&[u8]>(..)
            .unwrap()
            .map(|kv| kv.unwrap().0)
            .collect();
        assert!(
            keys.len() >= before as usize,
            "open {opens}: {} keys, {before} acknowledged before it",
            keys.len()
        );
        for (i, key) in keys.iter().enumerate() {
            assert_eq!(key, format!("k{i:08}").as_bytes(), "open {opens}: a hole");
        }
        opens += 1;
    }
    stop.store(true, Ordering::Relaxed);
    thread.join().unwrap();
    eprintln!("{opens} opens while the writer ran");
    assert!(opens >= 3, "only {opens} opens while the writer ran");
}

/// A file system whose reads of one file see a window of it as zeros: once (a read that
/// ran ahead of a writer filling those bytes) or always (damage).
#[derive(Debug)]
struct ZeroedWindow {
    inner: MemFs,
    path: PathBuf,
    window: Range<usize>,
    reads_left: Mutex<u32>,
}

impl FileSystem for ZeroedWindow {
    fn create(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.inner.create(path)
    }
    fn create_log(&self, path: &Path) -> Result<Box<dyn WritableFile>> {
        self.inner.create_log(path)
    }
    fn open(&self, path: &Path) -> Result<Arc<dyn RandomAccessFile>> {
        self.inner.open(path)
    }
    fn read_all(&self, path: &Path) -> Result<Vec<u8>> {
        let mut data = self.inner.read_all(path)?;
        let mut left = self.reads_left.lock().unwrap();
        if path == self.path && *left > 0 {
            *left -= 1;
            data[self.window.clone()].fill(0);
        }
        Ok(data)
    }
    fn rename(&self, from: &Path, to: &Path) -> Result<()> {
        self.inner.rename(from, to)
    }
    fn remove(&self, path: &Path) -> Result<()> {
        self.inner.remove(path)
    }
    fn list(&self, dir: &Path) -> Result<Vec<String>> {
        self.inner.list(dir)
    }
    fn create_dir_all(&self, dir: &Path) -> Result<()> {
        self.inner.create_dir_all(dir)
    }
    fn sync_dir(&self, dir: &Path) -> Result<()> {
        self.inner.sync_dir(dir)
    }
    fn exists(&self, path: &Path) -> bool {
        self.inner.exists(path)
    }
    fn lock(&self, path: &Path) -> Result<Box<dyn FileLock>> {
        self.inner.lock(path)
    }
}

/// A read-only open that read a WAL page before the writer filled it and a later page
/// after (zeros, then valid records) takes the zeros for the end of what it saw, once a
/// second read finds them written; zeros that stay zeros are damage, refused.
#[test]
fn a_read_only_open_ahead_of_the_writer_sees_a_prefix_and_damage_stays_damage() {
    let mem = MemFs::new();
    let dir = Path::new("/db");
    let writer = Db::open(
        dir,
        Options {
            fs: Arc::new(mem.clone()),
            ..Options::default()
        },
    )
    .unwrap();
    let wal = || {
        let name = mem
            .list(dir)
            .unwrap()
            .into_iter()
            .find(|n| n.ends_with(".wal"))
            .unwrap();
        dir.join(name)
    };
    let wal_len = || mem.read_all(&wal()).unwrap().len();
    for i in 0..4 {
        writer.put(format!("k{i}"), "v").unwrap();
    }
    let before = wal_len();
    for i in 4..7 {
        writer.put(format!("k{i}"), "v").unwrap();
    }
    let after = wal_len();
    for i in 7..10 {
        writer.put(format!("k{i}"), "v").unwrap();
    }
    assert!(after < wal_len(), "records after the window");

    let open = |reads: u32| {
        let fs = ZeroedWindow {
            inner: mem.clone(),
            path: wal(),
            window: before..after,
            reads_left: Mutex::new(reads),
        };
        Db::open(
            dir,
            Options {
                fs: Arc::new(fs),
                ..read_only()
            },
        )
    };
    let seen = open(1).unwrap();
    let keys: Vec<Vec<u8>> = contents(&seen).into_keys().collect();
    let first_four: Vec<Vec<u8>> = (0..4).map(|i| format!("k{i}").into_bytes()).collect();
    assert_eq!(keys, first_four);
    assert_eq!(seen.stats().wal_salvages, 0);
    // The control: the same zeros, still there when read again.
    match open(u32::MAX) {
        Err(Error::Corruption { .. }) => {}
        other => panic!("zeros that stay zeros opened: {:?}", other.map(|_| ())),
    }
    // The writer's database itself is whole.
    assert_eq!(contents(&writer).len(), 10);
}
