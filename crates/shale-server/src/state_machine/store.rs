//! The state machine store's state ([`StateMachineStore`] and what it shares between its
//! clones), the layout of its directory (`SM_CURRENT`, `sm-<generation>/`, `snapshots/`),
//! and the reads and writes of that layout that opening, applying and installing share.
//! `mod.rs` opens and applies, `snapshots.rs` builds and installs, `indexes.rs` and
//! `carried.rs` serve the replicated indexes; each adds its methods to the store.
//!
//! Thread safety: see `mod.rs`; every lock here is taken through [`lock`] or a poisoned
//! `RwLock`'s inner value.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, RwLock};

use openraft::{BasicNode, LogId, SnapshotMeta, StoredMembership};
use shale::fs::FileSystem;
use shale::{Db, Options, ReadOptions};
use shale_search::semantic::VectorIndex;
use shale_search::TextIndex;

use super::sessions::Sessions;
use super::supply::Supply;
use crate::command::IndexSpec;
use crate::error::{Error, Result};
use crate::format::{self, SnapshotHeader, SM_KEY_APPLIED, SM_KEY_MEMBERSHIP, SM_KEY_SHARD};
use crate::shard::Shard;
use crate::snapshot::SnapshotData;
use crate::time_spent::TimeSpent;
use crate::NodeId;

/// The directory of group `id`'s state machine in a node's `data_dir`: group 1's where a
/// node of one group keeps its state machine, each other's under `groups/<id>/`.
pub fn state_dir(data_dir: &Path, id: crate::GroupId) -> PathBuf {
    match id {
        crate::DEFAULT_GROUP => data_dir.join("state"),
        id => data_dir.join("groups").join(id.to_string()).join("state"),
    }
}

/// A group a split seeded on this node, for the node to start (`split.rs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seeded {
    pub child: crate::GroupId,
    /// The group that split (`None`: not known, for a child found on disk).
    pub parent: Option<crate::GroupId>,
    /// The split entry's log id: the child's log starts after it.
    pub split: LogId<NodeId>,
}

pub(super) const CURRENT_FILE: &str = "SM_CURRENT";
pub(super) const SNAPSHOT_DIR: &str = "snapshots";
pub(super) const CURRENT_SNAPSHOT: &str = "current.snap";

pub(super) type Membership = StoredMembership<NodeId, BasicNode>;

/// The open indexes of the current generation, by name.
pub(super) type Indexes = BTreeMap<String, ReplicatedIndex>;

/// One replicated index, open: its definition, its vector index, and its keyword index
/// when the definition has one. Cloning shares them.
#[derive(Clone)]
pub struct ReplicatedIndex {
    pub spec: IndexSpec,
    pub vectors: VectorIndex,
    pub keywords: Option<Arc<TextIndex>>,
}

pub(super) struct Shared {
    pub(super) data_dir: PathBuf,
    /// The node's data directory, where a split seeds its child's state (`split.rs`),
    /// and the group this state machine is.
    pub(super) node_dir: OnceLock<(PathBuf, crate::GroupId)>,
    /// Where a split applied here tells the node of the group it seeded.
    pub(super) seeded: Mutex<Option<tokio::sync::mpsc::UnboundedSender<Seeded>>>,
    pub(super) opts: Options,
    pub(super) db: RwLock<Arc<Db>>,
    /// Replaced with `db` by an install; written by the apply of an index definition.
    pub(super) indexes: RwLock<Indexes>,
    /// Replaced with `db` by an install; written by every apply of a session's command.
    pub(super) sessions: Mutex<Sessions>,
    /// The keys the group serves: replaced with `db` by an install; set by a claim.
    pub(super) shard: RwLock<Shard>,
    /// Vectors the log carried, until the indexes' workers take them (`carried.rs`).
    pub(super) supply: Arc<Supply>,
    pub(super) generation: Mutex<u64>,
    pub(super) applied: Mutex<(Option<LogId<NodeId>>, Membership)>,
    /// The last log index the durable snapshot (`current.snap` and the generation it
    /// belongs to) covers: the log store purges nothing past it (invariant 5).
    pub(super) durable_snapshot: tokio::sync::watch::Sender<u64>,
    pub(super) snapshot_lock: Mutex<()>,
    /// A received snapshot written into the next generation, awaiting its install.
    pub(super) prepared: Mutex<Option<Prepared>>,
    /// Received snapshots written into new generations, and the time that took.
    pub(super) snapshot_writes: TimeSpent,
}

/// The state machine store. Cloning shares it (the snapshot builder is a clone).
#[derive(Clone)]
pub struct StateMachineStore {
    pub(super) shared: Arc<Shared>,
}

impl std::fmt::Debug for StateMachineStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateMachineStore")
            .field("data_dir", &self.shared.data_dir)
            .finish()
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding one of these locks leaves plain data behind, never a broken
    // invariant of the engine: carry on with it.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The header of the snapshot file at `path`, if there is one.
pub(super) fn current_snapshot_header(path: &Path) -> Result<Option<SnapshotHeader>> {
    if !path.exists() {
        return Ok(None);
    }
    SnapshotData::open(path)?.header().map(Some)
}

pub(super) fn sm_dir(data_dir: &Path, generation: u64) -> PathBuf {
    data_dir.join(format!("sm-{generation}"))
}

/// The generation `SM_CURRENT` in `data_dir` names, if the file is there.
pub(super) fn read_generation(fs: &dyn FileSystem, data_dir: &Path) -> Result<Option<u64>> {
    let path = data_dir.join(CURRENT_FILE);
    if !fs.exists(&path) {
        return Ok(None);
    }
    let bytes = fs.read_all(&path)?;
    std::str::from_utf8(&bytes)
        .ok()
        .and_then(|text| text.strip_suffix('\n'))
        .and_then(|t| t.parse::<u64>().ok())
        .map(Some)
        .ok_or_else(|| {
            let text = String::from_utf8_lossy(&bytes);
            Error::corruption(CURRENT_FILE, format!("{text:?} is not a generation"))
        })
}

/// Make `SM_CURRENT` name `generation`, durably, on the engine's file system `fs` (the
/// one the state machine's databases live on): the engine's [`shale::fs::replace_file`]
/// writes a temporary file, syncs it, renames it over `SM_CURRENT` and syncs the
/// directory, so a crash leaves the old generation's name or the new one's.
pub(super) fn write_generation(
    fs: &dyn FileSystem,
    data_dir: &Path,
    generation: u64,
) -> Result<()> {
    let temp = format!("{CURRENT_FILE}.tmp");
    shale::fs::replace_file(fs, data_dir, CURRENT_FILE, &temp, |file| {
        file.append(format!("{generation}\n").as_bytes())
    })?;
    Ok(())
}

/// The group's shard as `db` records it: the whole key space without a record.
pub(super) fn read_shard(db: &Db) -> Result<Shard> {
    db.get(SM_KEY_SHARD)?
        .map_or_else(|| Ok(Shard::whole()), |b| format::decode_shard(&b))
}

pub(super) fn read_meta(
    db: &Db,
    ro: &ReadOptions<'_>,
) -> Result<(Option<LogId<NodeId>>, Membership)> {
    let applied = db
        .get_opt(SM_KEY_APPLIED, ro)?
        .map(|b| format::decode_log_id(&b))
        .transpose()?;
    let membership = db
        .get_opt(SM_KEY_MEMBERSHIP, ro)?
        .map(|b| format::decode_stored_membership(&b))
        .transpose()?
        .unwrap_or_default();
    Ok((applied, membership))
}

/// A snapshot written into a new generation and not yet switched to.
pub(super) struct Prepared {
    pub(super) meta: SnapshotMeta<NodeId, BasicNode>,
    pub(super) generation: u64,
    pub(super) db: Arc<Db>,
    pub(super) indexes: Indexes,
    pub(super) sessions: Sessions,
    pub(super) shard: Shard,
    pub(super) copy_path: PathBuf,
}
