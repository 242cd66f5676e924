//! The keys of the replication server's databases: the log store's (its vote, last purged
//! log id, identity and entries) and the state machine's reserved keys
//! (docs/format.md, "Replication").

use crate::error::{Error, Result};

/// The log store key of the vote.
pub const LOG_KEY_VOTE: &[u8] = &[0x01];
/// The log store key of the last purged log id.
pub const LOG_KEY_LAST_PURGED: &[u8] = &[0x02];
/// The log store key of the node's identity ([`Identity`](super::Identity)).
pub const LOG_KEY_IDENTITY: &[u8] = &[0x03];
/// First byte of every log entry key.
pub const LOG_ENTRY_PREFIX: u8 = 0x10;

/// The key of the log entry at `index`: the prefix, then the index big-endian.
pub fn log_entry_key(index: u64) -> [u8; 9] {
    let mut key = [LOG_ENTRY_PREFIX; 9];
    for (dst, src) in key.iter_mut().skip(1).zip(index.to_be_bytes()) {
        *dst = src;
    }
    key
}

/// The index in a log entry key.
///
/// # Errors
/// `Corruption` if `key` is not a log entry key.
pub fn log_entry_index(key: &[u8]) -> Result<u64> {
    match key.split_first() {
        Some((&LOG_ENTRY_PREFIX, rest)) => {
            let bytes: [u8; 8] = rest.try_into().map_err(|_| {
                Error::corruption("log entry key", format!("{} bytes, not 9", key.len()))
            })?;
            Ok(u64::from_be_bytes(bytes))
        }
        _ => Err(Error::corruption("log entry key", "wrong prefix")),
    }
}

/// First byte of the state machine's own keys; user keys may not start with it.
pub const RESERVED_PREFIX: u8 = 0xFF;
/// The state machine key of the last applied log id.
pub const SM_KEY_APPLIED: &[u8] = &[RESERVED_PREFIX, b'a'];
/// The state machine key of the last applied membership.
pub const SM_KEY_MEMBERSHIP: &[u8] = &[RESERVED_PREFIX, b'm'];
/// The prefix of the state machine keys of the index definitions: `0xFF 'x' ‖ name`.
pub const SM_INDEX_PREFIX: &[u8] = &[RESERVED_PREFIX, b'x'];
/// The prefix of the state machine keys of the client sessions ([`SessionKey`](super::SessionKey)).
pub const SM_SESSION_PREFIX: &[u8] = &[RESERVED_PREFIX, b's'];

/// The state machine key of index `name`'s definition.
pub fn index_key(name: &str) -> Vec<u8> {
    [SM_INDEX_PREFIX, name.as_bytes()].concat()
}
