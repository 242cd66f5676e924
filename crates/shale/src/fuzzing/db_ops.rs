//! Operations and crashes on a whole `Db` over `MemFs`, against a `BTreeMap` model.

use super::*;

/// Operations and crashes on a [`crate::Db`] over [`MemFs`], checked against a `BTreeMap`.
///
/// The bytes are a program: put, delete, batch (each synced or not), flush, compact, read
/// checks, a clean reopen (with or without a repair first), and crashes (kill -9, power
/// loss, power loss with a torn last write). Reads must always match the model. After a
/// crash the database must hold exactly the state after some prefix of the acknowledged
/// writes: all of them after kill -9, at least the synced ones (and everything before a
/// flush, compaction or close) after a power loss.
pub fn db_ops(data: &[u8]) {
    let mut input = Input::new(data);
    let compression = match input.u8() % 3 {
        0 => Compression::None,
        1 => Compression::Lz4,
        _ => Compression::Snappy,
    };
    let mut fs = MemFs::new();
    let mut db = open_db(&fs, compression);
    let mut model = Model::default();
    for _ in 0..48 {
        if input.is_empty() {
            break;
        }
        let op = input.u8();
        let sync = op & 0x80 != 0;
        match op % 16 {
            0..=8 => {
                let (batch, changes) = batch_from(op % 16, &mut input);
                model.write(&db, batch, changes, sync);
            }
            9 => {
                db.flush().expect("Db::flush");
                model.durable = model.writes.len();
            }
            10 => {
                db.compact_range(None, None).expect("Db::compact_range");
                model.durable = model.writes.len();
            }
            11 => model.check_reads(&db),
            12 => {
                db.close().expect("Db::close");
                drop(db);
                model.durable = model.writes.len();
                if op & 0x40 != 0 {
                    repair_clean(&fs, compression);
                }
                db = open_db(&fs, compression);
                model.check_reads(&db);
            }
            _ => {
                let kill = op & 0x10 != 0;
                let image = crash(&fs, op, &mut input);
                drop(db);
                fs = image;
                db = open_db(&fs, compression);
                model.recover(&db, kill);
            }
        }
    }
    model.check_reads(&db);
}

/// The batch of a write op (`kind` 0 to 8: a put, a delete, or up to four of either),
/// its keys and values from `input`, with the changes it makes.
fn batch_from(kind: u8, input: &mut Input<'_>) -> (WriteBatch, Vec<Change>) {
    let mut b = WriteBatch::new();
    match kind {
        0..=4 => {
            let k = ops_key(input.u8());
            let len = usize::from(input.u8() % 24);
            let v = input.bytes(len).to_vec();
            b.put(&k, &v);
            (b, vec![(k, Some(v))])
        }
        5..=6 => {
            let k = ops_key(input.u8());
            b.delete(&k);
            (b, vec![(k, None)])
        }
        _ => {
            let n = 1 + input.u8() % 4;
            let mut changes = Vec::new();
            for _ in 0..n {
                let k = ops_key(input.u8());
                if input.u8() & 1 == 0 {
                    let len = usize::from(input.u8() % 16);
                    let v = input.bytes(len).to_vec();
                    b.put(&k, &v);
                    changes.push((k, Some(v)));
                } else {
                    b.delete(&k);
                    changes.push((k, None));
                }
            }
            (b, changes)
        }
    }
}

/// The image `fs` leaves after the crash op `op` chooses: the process killed (bit 0x10),
/// or a power loss, tearing the last write (0x20) or writing back part of the unsynced
/// bytes (0x40) as `input` says.
fn crash(fs: &MemFs, op: u8, input: &mut Input<'_>) -> MemFs {
    if op & 0x10 != 0 {
        return fs.process_crash();
    }
    let tear = op & 0x20 != 0;
    let write_back = op & 0x40 != 0;
    fs.power_loss(PowerLoss {
        tear_last_write: tear.then(|| u64::from(input.u16())),
        keep_dir_ops: usize::from(input.u8() % 4),
        write_back: write_back.then(|| u64::from(input.u16())),
    })
}

pub(super) fn ops_key(b: u8) -> Vec<u8> {
    format!("k{:02}", b % 24).into_bytes()
}

/// Repair a database that was closed cleanly: it must find no damage, read the live
/// manifest's files, and move nothing to `lost/`, so the data it rewrites is all of it.
fn repair_clean(fs: &MemFs, compression: Compression) {
    let report = crate::Db::repair("db", &db_options(fs, compression)).expect("Db::repair");
    assert!(report.manifest_used, "repair of a clean database: {report}");
    assert!(
        report.problems.is_empty(),
        "repair of a clean database: {report}"
    );
    assert!(
        report.moved_to_lost.is_empty(),
        "repair of a clean database: {report}"
    );
}

pub(super) fn open_db(fs: &MemFs, compression: Compression) -> crate::Db {
    crate::Db::open("db", db_options(fs, compression))
        .expect("Db::open on a crash image must succeed")
}

fn db_options(fs: &MemFs, compression: Compression) -> Options {
    Options {
        fs: Arc::new(fs.clone()),
        write_buffer_size: 64 << 10,
        max_file_size: 16 << 10,
        block_size: 256,
        block_restart_interval: 4,
        compression,
        cache_size: 64 << 10,
        level0_compaction_trigger: 2,
        max_bytes_for_level_base: 1 << 20,
        // The smallest allowed: the manifest rolls whenever it has doubled since its
        // snapshot, so crashes and power losses land around rolls too.
        max_manifest_file_size: 1,
        ..Options::default()
    }
}

type Change = (Vec<u8>, Option<Vec<u8>>);

/// The acknowledged writes, and how many of them must survive a power loss.
#[derive(Default)]
pub(super) struct Model {
    writes: Vec<Vec<Change>>,
    durable: usize,
}

impl Model {
    fn write(&mut self, db: &crate::Db, batch: WriteBatch, changes: Vec<Change>, sync: bool) {
        let opts = if sync {
            WriteOptions::sync()
        } else {
            WriteOptions::default()
        };
        db.write(batch, opts).expect("Db::write");
        self.writes.push(changes);
        if sync {
            self.durable = self.writes.len();
        }
    }

    fn state_at(&self, n: usize) -> BTreeMap<Vec<u8>, Vec<u8>> {
        let mut state = BTreeMap::new();
        for changes in self.writes.iter().take(n) {
            for (k, v) in changes {
                match v {
                    Some(v) => state.insert(k.clone(), v.clone()),
                    None => state.remove(k),
                };
            }
        }
        state
    }

    fn check_reads(&self, db: &crate::Db) {
        let want = self.state_at(self.writes.len());
        assert_eq!(read_db(db), want, "database scan differs from the model");
        for b in 0..24u8 {
            let k = ops_key(b);
            let got = db.get(&k).expect("Db::get");
            assert_eq!(
                got.as_ref(),
                want.get(&k),
                "get {}",
                String::from_utf8_lossy(&k)
            );
        }
    }

    /// After a crash: the database holds the state after a prefix of the writes, at least
    /// the durable ones (all of them after kill -9). Forget the writes it lost.
    fn recover(&mut self, db: &crate::Db, kill: bool) {
        let got = read_db(db);
        let lo = if kill {
            self.writes.len()
        } else {
            self.durable
        };
        let found = (lo..=self.writes.len())
            .rev()
            .find(|&n| self.state_at(n) == got);
        let Some(n) = found else {
            panic!(
                "after a {} the database holds no prefix of {} writes with at least {lo}: {got:?}",
                if kill { "kill -9" } else { "power loss" },
                self.writes.len()
            );
        };
        self.writes.truncate(n);
        self.durable = self.durable.min(n);
        self.check_reads(db);
    }
}

pub(super) fn read_db(db: &crate::Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut state = BTreeMap::new();
    for pair in db.range::<Vec<u8>>(..).expect("Db::range") {
        let (k, v) = pair.expect("Db::range item");
        state.insert(k, v);
    }
    state
}

// ---------------------------------------------------------------------------------------
// seeds
