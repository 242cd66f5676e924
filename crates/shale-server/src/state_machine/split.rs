//! A split of the group's shard ([`Command::Split`](crate::command::Command::Split)),
//! applied alike on every replica at the same log index (docs/replication.md, "Splitting
//! a shard"). Nothing crosses the network: each replica derives the child group's state
//! from its own.
//!
//! 1. **Check**: the shard's version is the one the split names and the split key lies
//!    inside the shard, past its start; otherwise the split is refused and changes
//!    nothing. Replicated state only, so every replica decides alike.
//! 2. **Seed the child** in `state_dir(node, child)`, unless a `READY` marker is there
//!    already (the split is applied again after a crash lost the parent's unsynced
//!    apply): a checkpoint of the database as the entries before the split left it
//!    (hard links; index files copied by their hooks) becomes the child's generation 0;
//!    then, in one synced batch, the keys below the split are deleted (each index's hook
//!    drops them too), and the child's shard (from the split key, the version one higher),
//!    applied id (the split's) and membership (the parent's) are written; then `READY`,
//!    synced. `SEEDING`, written first, marks the directory as a seed: one without
//!    `READY` is a seed a crash interrupted, removed and made again. A directory without
//!    either is another group's state, never removed: the apply fails (the child id is
//!    in use on this node), and the node stops.
//! 3. **The parent** deletes the keys from the split key on and keeps the shard below it,
//!    one version higher, in one batch with the split's applied id, written at once so
//!    the entries after the split in the same apply call see the new shard.
//!
//! The child's Raft is started by the node: told of the split once it is applied
//! ([`StateMachineStore::on_split`]), or finding the seeded state at its next start.

use std::path::Path;

use openraft::LogId;
use shale::{Db, WriteBatch, WriteOptions};

use super::store::{lock, sm_dir, state_dir, write_generation, Membership, Seeded};
use super::StateMachineStore;
use crate::command::Response;
use crate::error::{Error, Result};
use crate::format::{self, SM_KEY_APPLIED, SM_KEY_MEMBERSHIP, SM_KEY_SHARD};
use crate::shard::Shard;
use crate::{GroupId, NodeId};

/// The file that marks a child's state as seeded whole.
pub(crate) const READY_FILE: &str = "READY";

/// The file that marks a directory as a child's seed, whole once `READY` is there too.
pub(crate) const SEEDING_FILE: &str = "SEEDING";

/// One split, as its entry names it.
pub(super) struct Split<'c> {
    pub at: &'c [u8],
    pub child: GroupId,
    pub version: u64,
    pub log_id: LogId<NodeId>,
}

impl StateMachineStore {
    /// Apply `split` (module docs) to the group while it serves `serving`, the entries
    /// before the split committed and `batch`, the apply's, empty; `serving` becomes the
    /// group's new shard.
    pub(super) fn split(
        &self,
        db: &Db,
        batch: &mut WriteBatch,
        serving: &mut Shard,
        split: &Split<'_>,
    ) -> Result<Response> {
        let shard = serving.clone();
        if shard.version != split.version {
            return Ok(Response::Refused(format!(
                "the split names version {} of the shard, which is {shard}",
                split.version
            )));
        }
        if !shard.contains(split.at) || split.at == shard.start.as_slice() {
            return Ok(Response::Refused(format!(
                "the split key {:?} is not inside the shard {shard}, past its start",
                split.at.escape_ascii().to_string()
            )));
        }
        let version = shard.version.saturating_add(1);
        let kept = Shard {
            start: shard.start.clone(),
            end: Some(split.at.to_vec()),
            version,
        };
        let child = Shard {
            start: split.at.to_vec(),
            end: shard.end.clone(),
            version,
        };
        let membership = lock(&self.shared.applied).1.clone();
        self.seed_child(db, split, &shard, &child, &membership)?;
        let mut parent = std::mem::take(batch);
        parent.delete_range(split.at, shard.end.as_deref().unwrap_or(&USER_KEYS_END));
        parent.put(SM_KEY_SHARD, format::encode_shard(&kept));
        self.commit(db, parent, Some(split.log_id), None)?;
        *self.shared.shard.write().unwrap_or_else(|e| e.into_inner()) = kept.clone();
        *serving = kept.clone();
        if let Some(seeded) = lock(&self.shared.seeded).as_ref() {
            // The node stops receiving only as it stops.
            let _ = seeded.send(Seeded {
                child: split.child,
                parent: self.shared.node_dir.get().map(|(_, group)| *group),
                split: split.log_id,
            });
        }
        Ok(Response::Split { kept, child })
    }

    /// Seed the child's state from `db` (module docs, step 2).
    fn seed_child(
        &self,
        db: &Db,
        split: &Split<'_>,
        parent: &Shard,
        child: &Shard,
        membership: &Membership,
    ) -> Result<()> {
        let (node_dir, _) = self.shared.node_dir.get().ok_or_else(|| {
            Error::Config(vec![
                "this state machine was opened without a node directory to seed groups in".into(),
            ])
        })?;
        let dir = state_dir(node_dir, split.child);
        let ready = ready_record(child, &split.log_id);
        if dir.join(READY_FILE).exists() {
            if read_file(&dir, READY_FILE)? == ready {
                return Ok(());
            }
            return Err(Error::Config(vec![format!(
                "a split seeds group {} in {}, which holds the child of another split",
                split.child,
                dir.display()
            )]));
        }
        if dir.exists() {
            if !dir.join(SEEDING_FILE).exists() {
                // Another group's state: never removed for a seed (the split's child id
                // is in use here). The apply fails and the node stops.
                return Err(Error::Config(vec![format!(
                    "a split seeds group {} in {}, which holds another state",
                    split.child,
                    dir.display()
                )]));
            }
            std::fs::remove_dir_all(&dir).map_err(|e| Error::io("remove", &dir, e))?;
        }
        std::fs::create_dir_all(&dir).map_err(|e| Error::io("mkdir", &dir, e))?;
        write_synced(&dir, SEEDING_FILE, &[])?;
        db.checkpoint(sm_dir(&dir, 0))?;
        write_generation(&*self.shared.opts.fs, &dir, 0)?;
        let seeded = StateMachineStore::open(&dir, self.shared.opts.clone())?;
        let mut batch = WriteBatch::new();
        batch.delete_range(&parent.start, split.at);
        batch.put(SM_KEY_SHARD, format::encode_shard(child));
        batch.put(SM_KEY_APPLIED, format::encode_log_id(&split.log_id));
        batch.put(
            SM_KEY_MEMBERSHIP,
            format::encode_stored_membership(membership),
        );
        let written = seeded.db().write(batch, WriteOptions::sync());
        let closed = seeded.close();
        written?;
        closed?;
        write_synced(&dir, READY_FILE, &ready)
    }
}

/// What `READY` holds: the split's log id, then the child's shard, so that a split never
/// takes another split's child for its own (docs/format.md 13.3).
pub(super) fn ready_record(child: &Shard, log_id: &LogId<NodeId>) -> Vec<u8> {
    let mut record = format::encode_log_id(log_id);
    record.extend_from_slice(&format::encode_shard(child));
    record
}

/// The split log id a seeded child's `READY` in `dir` names, if there is one.
///
/// # Errors
/// `Io`; `Corruption` for a record that does not decode.
pub fn read_ready(dir: &Path) -> Result<Option<LogId<NodeId>>> {
    if !dir.join(READY_FILE).exists() {
        return Ok(None);
    }
    let record = read_file(dir, READY_FILE)?;
    let (log_id, shard) = record.split_at(LOG_ID_RECORD_LEN.min(record.len()));
    format::decode_shard(shard)?;
    format::decode_log_id(log_id).map(Some)
}

/// Bytes of a log id record (`version:u8 term:u64 node_id:u64 index:u64`).
const LOG_ID_RECORD_LEN: usize = 25;

fn read_file(dir: &Path, name: &str) -> Result<Vec<u8>> {
    let path = dir.join(name);
    std::fs::read(&path).map_err(|e| Error::io("read", &path, e))
}

/// The end of the users' keys: every key a client may write is below it (the server's
/// own keys start with it).
const USER_KEYS_END: [u8; 1] = [format::RESERVED_PREFIX];

/// Create the file `name` in `dir` holding `bytes`, synced with the directory.
fn write_synced(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    use std::io::Write;
    let path = dir.join(name);
    let mut file = std::fs::File::create(&path).map_err(|e| Error::io("create", &path, e))?;
    file.write_all(bytes)
        .map_err(|e| Error::io("write", &path, e))?;
    file.sync_all().map_err(|e| Error::io("sync", &path, e))?;
    let d = std::fs::File::open(dir).map_err(|e| Error::io("open", dir, e))?;
    d.sync_all().map_err(|e| Error::io("sync", dir, e))
}
