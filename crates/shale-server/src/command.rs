//! What the Raft log carries for users ([`Command`]), what applying it answers
//! ([`Response`]), and the checks that run before a command is proposed.
//!
//! Invariant: a command that passes [`Command::validate`] applies on every replica without
//! an engine error, so all replicas reach the same state. The state machine runs the same
//! check at apply time and refuses (deterministically, on every replica alike) anything
//! that slipped past it.

use shale::options::{MAX_KEY_BYTES, MAX_VALUE_BYTES};

use crate::error::{Error, Result};
use crate::format::RESERVED_PREFIX;
use crate::shard::Shard;
use crate::GroupId;

/// The limits of one command are the protocol's: a client checks them too. See
/// [`crate::network::MAX_APPEND_BYTES`] for why a command stays small.
pub use shale_client::wire::{MAX_COMMAND_BYTES, MAX_OPS_PER_COMMAND};

/// One put (`value: Some`) or delete (`value: None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub key: Vec<u8>,
    pub value: Option<Vec<u8>>,
}

/// A user's write, as the Raft log carries it.
#[derive(Debug, Clone, PartialEq)]
pub enum Command {
    /// Puts and deletes applied atomically, in order.
    Write(Vec<Op>),
    /// Set `key` to `new_value` (delete it when `None`) if its value is `expected`
    /// (`None`: the key is absent).
    CompareAndSet {
        key: Vec<u8>,
        expected: Option<Vec<u8>>,
        new_value: Option<Vec<u8>>,
    },
    /// Independent commands of concurrent clients that the leader proposed as one entry
    /// (`proposer.rs`): applied in order, each answered on its own (`Response::Batch`).
    /// It validates only if each of its commands does, so it applies or is refused
    /// whole. Never nested; clients cannot send one.
    Batch(Vec<Command>),
    /// Create a vector index (`shale_search::semantic::VectorIndex`) over the keys under a prefix, on
    /// every replica: its definition is replicated state (`format.rs`, reserved key
    /// `0xFF 'x' name`), so every replica checks and indexes the same values.
    DefineIndex(IndexSpec),
    /// A client's write ([`Command::Write`] or [`Command::CompareAndSet`]) in its session:
    /// applied once however often it is retried, a retry answered as the first apply was
    /// (docs/replication.md, "Exactly-once writes").
    InSession { at: SessionSeq, cmd: Box<Command> },
    /// Open a session for a client's writes; its id is the log index of this command.
    /// Proposed alone.
    OpenSession,
    /// A command with the vectors the leader's model made for texts it puts under model
    /// indexes, so that replicas index them without running the model (docs/replication.md,
    /// "Embed once"). Only the leader makes one, around any other command but an index
    /// definition or a session's opening; never nested.
    Embedded {
        cmd: Box<Command>,
        vectors: Vec<CarriedVector>,
    },
    /// Split the group's shard at `at` (docs/replication.md, "Splitting a shard"): the
    /// group keeps the keys below `at`, and a new group `child`, seeded on every replica
    /// from the state this entry leaves, serves the keys from `at` on. Applied only while
    /// the shard's version is `version` and `at` lies inside it past its start; refused
    /// otherwise, changing nothing. Proposed alone.
    Split {
        at: Vec<u8>,
        child: GroupId,
        version: u64,
    },
}

/// The vector of one text a command puts: the put's position among the command's puts
/// ([`Command::put_values`]) and the model's vector for its value.
#[derive(Debug, Clone, PartialEq)]
pub struct CarriedVector {
    pub put: u32,
    pub vector: Vec<f32>,
}

/// Most bytes of vectors one command carries (the rest of its texts, if any, are embedded
/// by each replica): with [`MAX_COMMAND_BYTES`] of keys and values, an entry stays small
/// enough to be sent, written and synced within a heartbeat.
pub const MAX_CARRIED_VECTOR_BYTES: usize = 1024 * 1024;

/// Where a write stands in its client's session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SessionSeq {
    /// The session: the log index it was opened at.
    pub session: u64,
    /// The write's number in the session, from 1: each write its own, its retries the same.
    pub seq: u64,
    /// The lowest number the client still waits on an answer for (at most `seq`): the
    /// answers below it are never asked for again and may be forgotten.
    pub lowest_awaited: u64,
}

/// A replicated index: with a model, its values are UTF-8 texts that every replica
/// embeds, searched by text or vector; without one, vector records
/// (`shale_search::semantic::vector_value`) of `dim` components, searched by vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexSpec {
    /// `[A-Za-z0-9_-]`, at most `shale_search::semantic::MAX_INDEX_NAME` bytes.
    pub name: String,
    /// The keys it covers: those that start with it (not empty, not under the reserved
    /// prefix).
    pub prefix: Vec<u8>,
    /// The model's dimension when there is a model.
    pub dim: u32,
    pub metric: shale_search::vector::Metric,
    pub model: IndexModel,
    /// A keyword (BM25) index over the same keys too, with this analyzer: the text index
    /// of the same name (`shale_search::TextIndex`), exact at every applied write.
    pub keywords: Option<shale_search::Analyzer>,
}

/// What turns an index's values into vectors, on every replica.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IndexModel {
    /// Nothing: values are vector records.
    Vectors,
    /// `shale_search::semantic::HashEmbedder`: word hashing, no model files (tests, trials).
    Hash,
    /// all-MiniLM-L6-v2 (`shale-embed`): every replica needs the model
    /// (`scripts/fetch-model.sh`).
    MiniLm,
}

impl IndexModel {
    /// The dimension of the model's vectors (`None` for vectors given by clients).
    pub fn dim(self) -> Option<u32> {
        match self {
            IndexModel::Vectors => None,
            IndexModel::Hash => Some(shale_search::semantic::HashEmbedder::DIM as u32),
            IndexModel::MiniLm => Some(MINILM_DIM),
        }
    }
}

/// all-MiniLM-L6-v2's dimension.
pub const MINILM_DIM: u32 = 384;

/// The most components of a replicated index's vectors.
pub const MAX_INDEX_DIM: u32 = 4096;

/// What applying one log entry answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Response {
    /// A blank or membership entry.
    Internal,
    /// A [`Command::Write`] was applied.
    Written,
    /// A [`Command::CompareAndSet`]: whether it swapped, and the value before it.
    CompareAndSet {
        swapped: bool,
        current: Option<Vec<u8>>,
    },
    /// The command failed [`Command::validate`] at apply time and changed nothing (it
    /// should have been refused before it was proposed).
    Refused(String),
    /// A [`Command::Batch`]: one response per command, in order.
    Batch(Vec<Response>),
    /// A [`Command::DefineIndex`]: the index exists (now, or already with this definition).
    IndexDefined,
    /// A [`Command::OpenSession`]: the new session's id.
    SessionOpened(u64),
    /// A [`Command::InSession`] applied before, at `index`: its answer then. Nothing was
    /// applied again.
    Repeated { index: u64, response: Box<Response> },
    /// A [`Command::InSession`] that changed nothing because its session is unknown (never
    /// opened, or closed to make room for newer ones) or its answer was forgotten: whether
    /// an earlier try applied cannot be said.
    SessionExpired(String),
    /// A [`Command::Split`]: the shard the group keeps, and the child's.
    Split { kept: Shard, child: Shard },
    /// A write or compare-and-set with a key outside the group's shard: nothing applied
    /// (nor, in a session, recorded), on every replica alike. The shard is the group's
    /// now, for the client to find the right group.
    WrongShard(Shard),
}

/// A write's operations: at least one, at most [`MAX_OPS_PER_COMMAND`], each key and
/// value allowed.
fn validate_ops(ops: &[Op]) -> Result<()> {
    if ops.is_empty() {
        return Err(Error::InvalidArgument("a write holds no operation".into()));
    }
    if ops.len() > MAX_OPS_PER_COMMAND {
        return Err(Error::InvalidArgument(format!(
            "a write holds {} operations, more than the limit of {MAX_OPS_PER_COMMAND}",
            ops.len()
        )));
    }
    for op in ops {
        check_key(&op.key)?;
        if let Some(v) = &op.value {
            check_value(v)?;
        }
    }
    Ok(())
}

/// A write `cmd` in a session at `at`: numbers from 1, the write itself awaited, and a
/// write or compare-and-set that is valid.
fn validate_in_session(at: &SessionSeq, cmd: &Command) -> Result<()> {
    if at.session == 0 || at.seq == 0 || at.lowest_awaited > at.seq {
        return Err(Error::InvalidArgument(format!(
            "session {}, write {}, lowest awaited {}: a session and a write \
             number start at 1, and the write is awaited",
            at.session, at.seq, at.lowest_awaited
        )));
    }
    if !matches!(*cmd, Command::Write(_) | Command::CompareAndSet { .. }) {
        return Err(Error::InvalidArgument(
            "a session holds writes and compare-and-sets only".into(),
        ));
    }
    cmd.validate()
}

/// A batch's commands: at least one, none of a kind a batch may not hold, each valid.
fn validate_batch(cmds: &[Command]) -> Result<()> {
    if cmds.is_empty() {
        return Err(Error::InvalidArgument("a batch holds no command".into()));
    }
    if cmds.iter().any(|c| {
        matches!(
            c,
            Command::Batch(_)
                | Command::DefineIndex(_)
                | Command::OpenSession
                | Command::Embedded { .. }
                | Command::Split { .. }
        )
    }) {
        return Err(Error::InvalidArgument(
            "a batch holds a batch, an index definition, a session's opening, \
             carried vectors or a split"
                .into(),
        ));
    }
    cmds.iter().try_for_each(Command::validate)
}

impl Command {
    /// Refuse what would fail at apply or touch the server's own keys.
    ///
    /// # Errors
    /// `InvalidArgument` naming the first problem found.
    pub fn validate(&self) -> Result<()> {
        match self {
            Command::Write(ops) => {
                validate_ops(ops)?;
                check_total(self.bytes())
            }
            Command::CompareAndSet {
                key,
                expected,
                new_value,
            } => {
                check_key(key)?;
                for v in [expected, new_value].into_iter().flatten() {
                    check_value(v)?;
                }
                check_total(self.bytes())
            }
            Command::DefineIndex(spec) => spec.validate(),
            Command::OpenSession => Ok(()),
            Command::InSession { at, cmd } => validate_in_session(at, cmd),
            Command::Batch(cmds) => {
                validate_batch(cmds)?;
                if self.ops() > MAX_OPS_PER_COMMAND {
                    return Err(Error::InvalidArgument(format!(
                        "a batch holds {} operations, more than the limit of {MAX_OPS_PER_COMMAND}",
                        self.ops()
                    )));
                }
                check_total(self.bytes())
            }
            Command::Embedded { cmd, vectors } => {
                if matches!(
                    **cmd,
                    Command::Embedded { .. }
                        | Command::DefineIndex(_)
                        | Command::OpenSession
                        | Command::Split { .. }
                ) {
                    return Err(Error::InvalidArgument(
                        "vectors carried for an index definition, a session's opening, \
                         vectors or a split"
                            .into(),
                    ));
                }
                cmd.validate()?;
                check_carried(vectors, cmd.put_values().len())
            }
            Command::Split { at, child, .. } => {
                if at.is_empty() {
                    return Err(Error::InvalidArgument(
                        "a split at the empty key would leave a group no key".into(),
                    ));
                }
                if *child == 0 {
                    return Err(Error::InvalidArgument("group ids start at 1".into()));
                }
                check_key(at)
            }
        }
    }

    /// Operations in the command: puts and deletes, a compare-and-set, an index
    /// definition or a session's opening counting one.
    pub fn ops(&self) -> usize {
        match self {
            Command::Write(ops) => ops.len(),
            Command::CompareAndSet { .. }
            | Command::DefineIndex(_)
            | Command::OpenSession
            | Command::Split { .. } => 1,
            Command::Batch(cmds) => cmds.iter().map(Command::ops).sum(),
            Command::InSession { cmd, .. } | Command::Embedded { cmd, .. } => cmd.ops(),
        }
    }

    /// The user keys the command writes or compares, in order (an index definition and a
    /// session's opening have none).
    pub fn keys(&self) -> Vec<&[u8]> {
        let mut keys = Vec::new();
        self.push_keys(&mut keys);
        keys
    }

    fn push_keys<'c>(&'c self, keys: &mut Vec<&'c [u8]>) {
        match self {
            Command::Write(ops) => keys.extend(ops.iter().map(|op| op.key.as_slice())),
            Command::CompareAndSet { key, .. } => keys.push(key),
            Command::Batch(cmds) => cmds.iter().for_each(|c| c.push_keys(keys)),
            Command::InSession { cmd, .. } | Command::Embedded { cmd, .. } => cmd.push_keys(keys),
            Command::DefineIndex(_) | Command::OpenSession | Command::Split { .. } => {}
        }
    }

    /// Whether the command holds a compare-and-set (which reads before it writes).
    pub fn compares(&self) -> bool {
        match self {
            Command::CompareAndSet { .. } => true,
            Command::Batch(cmds) => cmds.iter().any(Command::compares),
            Command::InSession { cmd, .. } | Command::Embedded { cmd, .. } => cmd.compares(),
            Command::Write(_)
            | Command::DefineIndex(_)
            | Command::OpenSession
            | Command::Split { .. } => false,
        }
    }

    /// Bytes of keys and values in the command (not of the vectors an
    /// [`Command::Embedded`] carries, bounded on their own by [`MAX_CARRIED_VECTOR_BYTES`]).
    pub fn bytes(&self) -> usize {
        let len = |v: &Option<Vec<u8>>| v.as_ref().map_or(0, Vec::len);
        match self {
            Command::Write(ops) => ops.iter().fold(0usize, |n, op| {
                n.saturating_add(op.key.len())
                    .saturating_add(len(&op.value))
            }),
            Command::CompareAndSet {
                key,
                expected,
                new_value,
            } => key
                .len()
                .saturating_add(len(expected))
                .saturating_add(len(new_value)),
            Command::Batch(cmds) => cmds.iter().fold(0usize, |n, c| n.saturating_add(c.bytes())),
            Command::DefineIndex(spec) => spec.name.len().saturating_add(spec.prefix.len()),
            Command::InSession { cmd, .. } | Command::Embedded { cmd, .. } => cmd.bytes(),
            Command::OpenSession => 0,
            Command::Split { at, .. } => at.len(),
        }
    }

    /// Bytes of the vectors an [`Command::Embedded`] carries (0 for any other command).
    pub fn carried_bytes(&self) -> usize {
        match self {
            Command::Embedded { vectors, .. } => vectors
                .iter()
                .fold(0usize, |n, v| n.saturating_add(4 * v.vector.len() + 8)),
            _ => 0,
        }
    }

    /// The puts the command may make, as a batch: what the indexes check
    /// (`state_machine::check_indexes`) before it is proposed and when it applies.
    pub fn puts(&self) -> shale::WriteBatch {
        let mut batch = shale::WriteBatch::new();
        for (key, value) in self.put_values() {
            batch.put(key, value);
        }
        batch
    }

    /// The keys and values the command may put, in order: a [`CarriedVector`] names its
    /// put by its position here.
    pub fn put_values(&self) -> Vec<(&[u8], &[u8])> {
        let mut puts = Vec::new();
        self.add_puts(&mut puts);
        puts
    }

    fn add_puts<'a>(&'a self, puts: &mut Vec<(&'a [u8], &'a [u8])>) {
        match self {
            Command::Write(ops) => puts.extend(
                ops.iter()
                    .filter_map(|op| Some((op.key.as_slice(), op.value.as_deref()?))),
            ),
            Command::CompareAndSet {
                key,
                new_value: Some(v),
                ..
            } => puts.push((key, v)),
            Command::CompareAndSet { .. }
            | Command::DefineIndex(_)
            | Command::OpenSession
            | Command::Split { .. } => {}
            Command::Batch(cmds) => cmds.iter().for_each(|c| c.add_puts(puts)),
            Command::InSession { cmd, .. } | Command::Embedded { cmd, .. } => cmd.add_puts(puts),
        }
    }
}

/// Refuse carried vectors that do not name distinct puts of the command in order, that
/// are empty, longer than [`MAX_INDEX_DIM`] or not finite, or that exceed
/// [`MAX_CARRIED_VECTOR_BYTES`] in all.
fn check_carried(vectors: &[CarriedVector], puts: usize) -> Result<()> {
    let mut bytes = 0usize;
    let mut next = 0usize;
    for v in vectors {
        let put = usize::try_from(v.put).unwrap_or(usize::MAX);
        if put < next || put >= puts {
            return Err(Error::InvalidArgument(format!(
                "a carried vector names put {put}: not one of the command's {puts} puts in order"
            )));
        }
        next = put + 1;
        if v.vector.is_empty() || v.vector.len() > MAX_INDEX_DIM as usize {
            return Err(Error::InvalidArgument(format!(
                "a carried vector of {} components: 1 to {MAX_INDEX_DIM}",
                v.vector.len()
            )));
        }
        if !v.vector.iter().all(|x| x.is_finite()) {
            return Err(Error::InvalidArgument(
                "a carried vector has a component that is not finite".into(),
            ));
        }
        bytes = bytes.saturating_add(4 * v.vector.len());
    }
    if bytes > MAX_CARRIED_VECTOR_BYTES {
        return Err(Error::InvalidArgument(format!(
            "{bytes} bytes of carried vectors exceed the limit of {MAX_CARRIED_VECTOR_BYTES}"
        )));
    }
    Ok(())
}

impl IndexSpec {
    /// Refuse a name, prefix or dimension the index could not take.
    ///
    /// # Errors
    /// `InvalidArgument` naming the first problem.
    pub fn validate(&self) -> Result<()> {
        let name_ok = !self.name.is_empty()
            && self.name.len() <= shale_search::semantic::MAX_INDEX_NAME
            && self
                .name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !name_ok {
            return Err(Error::InvalidArgument(format!(
                "index name {:?}: 1 to {} characters of [A-Za-z0-9_-]",
                self.name,
                shale_search::semantic::MAX_INDEX_NAME
            )));
        }
        if self.prefix.is_empty() {
            return Err(Error::InvalidArgument(
                "an index needs a prefix: the server's own keys are under no index".into(),
            ));
        }
        check_key(&self.prefix)?;
        if let Some(dim) = self.model.dim().filter(|d| *d != self.dim) {
            return Err(Error::InvalidArgument(format!(
                "index dimension {}: its model makes vectors of {dim}",
                self.dim
            )));
        }
        if self.dim == 0 || self.dim > MAX_INDEX_DIM {
            return Err(Error::InvalidArgument(format!(
                "index dimension {}: 1 to {MAX_INDEX_DIM}",
                self.dim
            )));
        }
        Ok(())
    }

    /// Whether the two indexes would share a key (one prefix starts the other).
    pub fn overlaps(&self, other: &IndexSpec) -> bool {
        self.prefix.starts_with(&other.prefix) || other.prefix.starts_with(&self.prefix)
    }
}

/// A user key: within the engine's limit and outside the reserved prefix.
///
/// # Errors
/// `InvalidArgument` when it is not.
pub fn check_key(key: &[u8]) -> Result<()> {
    if key.first() == Some(&RESERVED_PREFIX) {
        return Err(Error::InvalidArgument(format!(
            "keys starting with byte 0x{RESERVED_PREFIX:02X} are reserved for the server"
        )));
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(Error::InvalidArgument(format!(
            "key of {} bytes exceeds the limit of {MAX_KEY_BYTES}",
            key.len()
        )));
    }
    Ok(())
}

fn check_value(value: &[u8]) -> Result<()> {
    if value.len() > MAX_VALUE_BYTES {
        return Err(Error::InvalidArgument(format!(
            "value of {} bytes exceeds the limit of {MAX_VALUE_BYTES}",
            value.len()
        )));
    }
    Ok(())
}

fn check_total(bytes: usize) -> Result<()> {
    if bytes > MAX_COMMAND_BYTES {
        return Err(Error::InvalidArgument(format!(
            "a command of {bytes} bytes exceeds the limit of {MAX_COMMAND_BYTES}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key: &[u8], value: &[u8]) -> Op {
        Op {
            key: key.to_vec(),
            value: Some(value.to_vec()),
        }
    }

    #[test]
    fn reserved_keys_are_refused_everywhere() {
        let reserved = [RESERVED_PREFIX, b'a'];
        assert!(Command::Write(vec![put(&reserved, b"v")])
            .validate()
            .is_err());
        let cas = Command::CompareAndSet {
            key: reserved.to_vec(),
            expected: None,
            new_value: Some(b"v".to_vec()),
        };
        assert!(cas.validate().is_err());
        assert!(Command::Write(vec![put(b"\xFEok", b"v")])
            .validate()
            .is_ok());
    }

    #[test]
    fn oversized_and_empty_writes_are_refused() {
        assert!(Command::Write(vec![]).validate().is_err());
        let long_key = vec![b'k'; MAX_KEY_BYTES + 1];
        assert!(Command::Write(vec![put(&long_key, b"v")])
            .validate()
            .is_err());
        let many = vec![put(b"k", b"v"); MAX_OPS_PER_COMMAND + 1];
        assert!(Command::Write(many).validate().is_err());
        assert!(Command::Write(vec![put(b"", b"")]).validate().is_ok());
    }

    #[test]
    fn batches_are_flat_non_empty_and_within_the_limits() {
        let one = Command::Write(vec![put(b"k", b"v")]);
        assert!(Command::Batch(vec![one.clone(), one.clone()])
            .validate()
            .is_ok());
        assert!(Command::Batch(vec![]).validate().is_err());
        let nested = Command::Batch(vec![Command::Batch(vec![one.clone()])]);
        assert!(nested.validate().is_err());
        let half = Command::Write(vec![put(b"k", b"v"); MAX_OPS_PER_COMMAND / 2 + 1]);
        assert!(Command::Batch(vec![half.clone(), half]).validate().is_err());
        let big = Command::Write(vec![put(b"k", &vec![0; MAX_COMMAND_BYTES / 2 + 1])]);
        assert!(Command::Batch(vec![big.clone(), big]).validate().is_err());
        assert!(Command::Batch(vec![one, Command::OpenSession])
            .validate()
            .is_err());
    }

    #[test]
    fn a_session_holds_one_numbered_write() {
        let at = |session, seq, lowest_awaited| SessionSeq {
            session,
            seq,
            lowest_awaited,
        };
        let write = Command::Write(vec![put(b"k", b"v")]);
        let in_session = |at, cmd: &Command| Command::InSession {
            at,
            cmd: Box::new(cmd.clone()),
        };
        assert!(in_session(at(5, 3, 2), &write).validate().is_ok());
        assert!(Command::Batch(vec![in_session(at(5, 3, 3), &write)])
            .validate()
            .is_ok());
        for bad in [at(0, 1, 1), at(5, 0, 0), at(5, 3, 4)] {
            assert!(in_session(bad, &write).validate().is_err(), "{bad:?}");
        }
        let nested = in_session(at(5, 3, 3), &write);
        assert!(in_session(at(5, 4, 4), &nested).validate().is_err());
        let reserved = Command::Write(vec![put(&[RESERVED_PREFIX], b"v")]);
        assert!(in_session(at(5, 3, 3), &reserved).validate().is_err());
    }

    #[test]
    fn carried_vectors_name_the_puts_in_order_within_bounds() {
        let write = Command::Write(vec![
            put(b"a", b"one"),
            Op {
                key: b"b".to_vec(),
                value: None,
            },
            put(b"c", b"two"),
        ]);
        let carry = |cmd: &Command, vectors: Vec<(u32, Vec<f32>)>| Command::Embedded {
            cmd: Box::new(cmd.clone()),
            vectors: vectors
                .into_iter()
                .map(|(put, vector)| CarriedVector { put, vector })
                .collect(),
        };
        assert_eq!(write.put_values().len(), 2, "a delete is no put");
        assert!(carry(&write, vec![(0, vec![1.0]), (1, vec![2.0])])
            .validate()
            .is_ok());
        let wide = vec![0.5; MAX_INDEX_DIM as usize];
        let refused = [
            vec![(1, vec![1.0]), (0, vec![2.0])],
            vec![(0, vec![1.0]), (0, vec![2.0])],
            vec![(2, vec![1.0])],
            vec![(0, vec![])],
            vec![(0, vec![0.5; MAX_INDEX_DIM as usize + 1])],
            vec![(0, vec![f32::NAN])],
            vec![(0, vec![f32::INFINITY])],
        ];
        for vectors in refused {
            assert!(
                carry(&write, vectors.clone()).validate().is_err(),
                "{vectors:?}"
            );
        }
        // 1 MiB of components at most, over any number of puts.
        let many = Command::Write((0..100u8).map(|i| put(&[b'k', i], b"t")).collect());
        let fits = MAX_CARRIED_VECTOR_BYTES / (4 * wide.len());
        let vectors = |n: usize| (0..n).map(|i| (i as u32, wide.clone())).collect();
        assert!(carry(&many, vectors(fits)).validate().is_ok());
        assert!(carry(&many, vectors(fits + 1)).validate().is_err());
        // Never nested, never around an index definition or a session's opening, never
        // in a batch.
        let embedded = carry(&write, vec![]);
        assert!(carry(&embedded, vec![]).validate().is_err());
        assert!(carry(&Command::OpenSession, vec![]).validate().is_err());
        assert!(Command::Batch(vec![embedded]).validate().is_err());
    }
}
