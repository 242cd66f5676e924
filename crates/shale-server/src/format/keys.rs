//! The keys of the replication server's databases: the log store's (the node's identity,
//! and each group's vote, last purged log id and entries) and the state machine's reserved
//! keys (docs/format.md, "Replication").

use crate::error::{Error, Result};
use crate::ids::GroupId;

/// The log store key of the node's identity ([`Identity`](super::Identity)).
pub const LOG_KEY_IDENTITY: &[u8] = &[0x03];
/// First byte of every key of a group's log: `0x20 ‖ group:u64 big-endian ‖ key`, the key
/// one of [`LogKeys`]'.
pub const GROUP_LOG_PREFIX: u8 = 0x20;

/// A group's vote, after the group's prefix.
const VOTE: u8 = 0x01;
/// A group's last purged log id, after the group's prefix.
const LAST_PURGED: u8 = 0x02;
/// First byte of a group's log entry key, after the group's prefix.
const ENTRY: u8 = 0x10;

/// The key ranges `[start, end)` of layout 1, which held the log of one group at the top
/// of the key space: the vote and last purged id, and the entries. Layout 2 keeps the same
/// keys under the group's prefix ([`LogKeys::nest`]).
pub const LAYOUT_1_LOG_RANGES: [(&[u8], &[u8]); 2] = [(&[VOTE], &[0x03]), (&[ENTRY], &[ENTRY + 1])];

/// The keys of one Raft group's log in the node's log store: the group's prefix, then
/// `01` the vote, `02` the last purged log id, `10 ‖ index:u64 big-endian` an entry (so a
/// group's entries sort by index, and the groups' logs lie apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LogKeys {
    prefix: [u8; 9],
}

impl LogKeys {
    /// The keys of `group`'s log.
    pub fn of(group: GroupId) -> LogKeys {
        let mut prefix = [GROUP_LOG_PREFIX; 9];
        prefix[1..].copy_from_slice(&group.to_be_bytes());
        LogKeys { prefix }
    }

    /// The group whose keys these are.
    pub fn group(&self) -> GroupId {
        let mut id = [0u8; 8];
        id.copy_from_slice(&self.prefix[1..]);
        GroupId::from_be_bytes(id)
    }

    fn key<const N: usize>(&self, tail: &[u8]) -> [u8; N] {
        let mut key = [0u8; N];
        key[..9].copy_from_slice(&self.prefix);
        key[9..].copy_from_slice(tail);
        key
    }

    /// The key of the group's vote.
    pub fn vote(&self) -> [u8; 10] {
        self.key(&[VOTE])
    }

    /// The key of the group's last purged log id.
    pub fn last_purged(&self) -> [u8; 10] {
        self.key(&[LAST_PURGED])
    }

    /// The key of the group's log entry at `index`.
    pub fn entry(&self, index: u64) -> [u8; 18] {
        let mut tail = [ENTRY; 9];
        tail[1..].copy_from_slice(&index.to_be_bytes());
        self.key(&tail)
    }

    /// The first key after every entry key of the group.
    pub fn entries_end(&self) -> [u8; 10] {
        self.key(&[ENTRY + 1])
    }

    /// The index in one of the group's entry keys.
    ///
    /// # Errors
    /// `Corruption` if `key` is not an entry key of this group.
    pub fn entry_index(&self, key: &[u8]) -> Result<u64> {
        let tail = key
            .strip_prefix(&self.prefix[..])
            .ok_or_else(|| Error::corruption("log entry key", "another group's prefix"))?;
        match tail.split_first() {
            Some((&ENTRY, index)) => {
                let bytes: [u8; 8] = index.try_into().map_err(|_| {
                    Error::corruption("log entry key", format!("{} bytes, not 18", key.len()))
                })?;
                Ok(u64::from_be_bytes(bytes))
            }
            _ => Err(Error::corruption("log entry key", "not an entry key")),
        }
    }

    /// The key in this group of `key`, a key of the group's own (the keys of layout 1).
    pub fn nest(&self, key: &[u8]) -> Vec<u8> {
        [&self.prefix[..], key].concat()
    }
}

/// First byte of the state machine's own keys; user keys may not start with it.
pub const RESERVED_PREFIX: u8 = 0xFF;
/// The state machine key of the last applied log id.
pub const SM_KEY_APPLIED: &[u8] = &[RESERVED_PREFIX, b'a'];
/// The state machine key of the last applied membership.
pub const SM_KEY_MEMBERSHIP: &[u8] = &[RESERVED_PREFIX, b'm'];
/// The state machine key of the group's shard ([`Shard`](crate::shard::Shard)); absent:
/// the whole key space, at version 0.
pub const SM_KEY_SHARD: &[u8] = &[RESERVED_PREFIX, b'r'];
/// The prefix of the state machine keys of the index definitions: `0xFF 'x' ‖ name`.
pub const SM_INDEX_PREFIX: &[u8] = &[RESERVED_PREFIX, b'x'];
/// The prefix of the state machine keys of the client sessions ([`SessionKey`](super::SessionKey)).
pub const SM_SESSION_PREFIX: &[u8] = &[RESERVED_PREFIX, b's'];

/// The state machine key of index `name`'s definition.
pub fn index_key(name: &str) -> Vec<u8> {
    [SM_INDEX_PREFIX, name.as_bytes()].concat()
}
