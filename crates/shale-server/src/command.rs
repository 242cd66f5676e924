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

/// Most operations in one replicated batch: a log entry stays far below the engine's
/// batch limit, and one proposal cannot hold the log for long.
pub const MAX_OPS_PER_COMMAND: usize = 10_000;

/// Most bytes of keys and values in one command, far below the engine's own limits. A log
/// entry travels whole in one `AppendEntries`, and openraft 0.9 gives an append one
/// heartbeat interval (100 ms by default) to be sent, written and fsynced on the follower
/// before it counts the follower unreachable and retries the same append: an entry too
/// large for that would stall replication for good. See
/// [`crate::network::MAX_APPEND_BYTES`].
pub const MAX_COMMAND_BYTES: usize = 1024 * 1024;

/// One put (`value: Some`) or delete (`value: None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Op {
    pub key: Vec<u8>,
    pub value: Option<Vec<u8>>,
}

/// A user's write, as the Raft log carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

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
}

impl Command {
    /// Refuse what would fail at apply or touch the server's own keys.
    ///
    /// # Errors
    /// `InvalidArgument` naming the first problem found.
    pub fn validate(&self) -> Result<()> {
        match self {
            Command::Write(ops) => {
                if ops.is_empty() {
                    return Err(Error::InvalidArgument("a write holds no operation".into()));
                }
                if ops.len() > MAX_OPS_PER_COMMAND {
                    return Err(Error::InvalidArgument(format!(
                        "a write holds {} operations, more than the limit of {MAX_OPS_PER_COMMAND}",
                        ops.len()
                    )));
                }
                let mut bytes = 0usize;
                for op in ops {
                    check_key(&op.key)?;
                    if let Some(v) = &op.value {
                        check_value(v)?;
                    }
                    bytes = bytes
                        .saturating_add(op.key.len())
                        .saturating_add(op.value.as_ref().map_or(0, Vec::len));
                }
                check_total(bytes)
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
                check_total(
                    key.len()
                        .saturating_add(expected.as_ref().map_or(0, Vec::len))
                        .saturating_add(new_value.as_ref().map_or(0, Vec::len)),
                )
            }
        }
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
}
