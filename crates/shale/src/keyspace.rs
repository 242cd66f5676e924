//! Keyspaces: named key spaces of one database, each its own tree (memtable, SSTables,
//! levels) with its own options, sharing the WAL, the sequence numbers, the block cache
//! and the background threads (RocksDB's column families, fjall's partitions).
//!
//! This module is a leaf: the id that WAL entries and manifest records carry, and the
//! rules for names. A keyspace's options are `options::KeyspaceOptions`; its definition as
//! the manifest records it is `version::KeyspaceDef`; the trees live in `db/`.

/// A keyspace's number: assigned once, never reused after a drop (so a WAL entry of a
/// dropped keyspace can never land in a later one). The default keyspace is 0.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct KeyspaceId(pub u32);

impl KeyspaceId {
    /// The keyspace every database has, holding what `Db::put` and `Db::get` reach.
    pub const DEFAULT: KeyspaceId = KeyspaceId(0);

    pub fn is_default(self) -> bool {
        self == KeyspaceId::DEFAULT
    }
}

/// The name of the default keyspace.
pub const DEFAULT_NAME: &str = "default";

/// Longest keyspace name, in bytes.
pub const MAX_NAME_BYTES: usize = 255;

/// Check a name a user gave: 1 to 255 bytes of UTF-8, not the default's.
pub fn check_name(name: &str) -> Result<(), String> {
    if name.is_empty() || name.len() > MAX_NAME_BYTES {
        return Err(format!(
            "a keyspace name has 1 to {MAX_NAME_BYTES} bytes, not {}",
            name.len()
        ));
    }
    if name == DEFAULT_NAME {
        return Err(format!("\"{DEFAULT_NAME}\" is the default keyspace's name"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        assert!(check_name("users").is_ok());
        assert!(check_name("").is_err());
        assert!(check_name(DEFAULT_NAME).is_err());
        assert!(check_name(&"x".repeat(MAX_NAME_BYTES + 1)).is_err());
    }
}
