//! The client's copy of the shard map: which group serves a key.
//!
//! A new client believes the key space is one shard, served by group 1, so it costs an
//! unsplit cluster no extra call. A request sent to a group that does not serve its key
//! is refused whole (`shale-shard: moved`, nothing applied or read); the client then
//! fetches the map from the node that refused it and routes the request again, as TiKV's
//! clients do on a stale region epoch.
//!
//! Invariant: the shards are in key order, the first starts at the empty key, each ends
//! where the next starts, and only the last has no end, so every key has one shard.

use crate::error::ClientError;
use crate::pb;

/// The group of a key space that was never split.
pub const DEFAULT_GROUP: u64 = 1;

/// One shard as the client knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    pub group: u64,
    /// The first key it serves.
    pub start: Vec<u8>,
    /// The first key after it; `None`: it serves every key from `start` on.
    pub end: Option<Vec<u8>>,
    /// Changes whenever the shard's range does.
    pub version: u64,
    /// The group's leader when the map was fetched, if the node knew one.
    pub leader_addr: Option<String>,
}

/// The shards of the key space, in key order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Routes {
    shards: Vec<Shard>,
}

impl Default for Routes {
    fn default() -> Routes {
        Routes {
            shards: vec![Shard {
                group: DEFAULT_GROUP,
                start: Vec::new(),
                end: None,
                version: 0,
                leader_addr: None,
            }],
        }
    }
}

impl Routes {
    /// The map a node answered `ShardMap` with.
    ///
    /// # Errors
    /// `Server` for a map that leaves a key without a shard or gives it two.
    pub(super) fn from_map(map: pb::ShardMapResponse) -> Result<Routes, ClientError> {
        let shards: Vec<Shard> = map
            .shards
            .into_iter()
            .map(|s| Shard {
                group: s.group,
                start: s.start,
                end: s.end,
                version: s.version,
                leader_addr: s.leader_addr,
            })
            .collect();
        let bad = |why: &str| Err(ClientError::Server(format!("shard map: {why}")));
        match (shards.first(), shards.last()) {
            (Some(first), Some(last)) if first.start.is_empty() && last.end.is_none() => {}
            (None, _) | (_, None) => return bad("no shard"),
            _ => return bad("the shards do not cover every key"),
        }
        let joined = shards
            .iter()
            .zip(shards.iter().skip(1))
            .all(|(a, b)| a.end.as_ref() == Some(&b.start))
            && shards
                .iter()
                .all(|s| s.end.as_ref().is_none_or(|end| s.start < *end));
        if !joined {
            return bad("the shards are not in key order, each ending where the next starts");
        }
        Ok(Routes { shards })
    }

    pub(super) fn shards(&self) -> &[Shard] {
        &self.shards
    }

    /// Whether `other` has the same shards (leaders aside).
    pub(super) fn same_shards(&self, other: &Routes) -> bool {
        let same = |a: &Shard, b: &Shard| {
            (a.group, &a.start, &a.end, a.version) == (b.group, &b.start, &b.end, b.version)
        };
        self.shards.len() == other.shards.len()
            && self
                .shards
                .iter()
                .zip(&other.shards)
                .all(|(a, b)| same(a, b))
    }

    /// The group serving `key`.
    pub(super) fn group_of(&self, key: &[u8]) -> u64 {
        // The last shard starting at or before `key`; the first starts at the empty key.
        let after = self.shards.partition_point(|s| s.start.as_slice() <= key);
        self.shards
            .get(after.saturating_sub(1))
            .map_or(DEFAULT_GROUP, |s| s.group)
    }

    /// The one group serving every key of `keys` ([`DEFAULT_GROUP`] for none).
    ///
    /// # Errors
    /// `CrossShard`, naming the groups, if the keys lie in more than one shard.
    pub(super) fn group_of_all<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k [u8]>,
    ) -> Result<u64, ClientError> {
        let mut groups: Vec<u64> = keys.into_iter().map(|k| self.group_of(k)).collect();
        groups.sort_unstable();
        groups.dedup();
        match groups.as_slice() {
            [] => Ok(DEFAULT_GROUP),
            [one] => Ok(*one),
            _ => Err(ClientError::CrossShard { groups }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(group: u64, start: &[u8], end: Option<&[u8]>) -> pb::ShardInfo {
        pb::ShardInfo {
            group,
            start: start.to_vec(),
            end: end.map(<[u8]>::to_vec),
            version: 1,
            leader_addr: None,
        }
    }

    fn map(shards: Vec<pb::ShardInfo>) -> Result<Routes, ClientError> {
        Routes::from_map(pb::ShardMapResponse { shards })
    }

    #[test]
    fn every_key_has_the_one_group_whose_shard_holds_it() {
        let routes = map(vec![
            info(1, b"", Some(b"h")),
            info(2, b"h", Some(b"p")),
            info(3, b"p", None),
        ])
        .expect("a good map");
        for (key, group) in [
            (&b""[..], 1),
            (b"a", 1),
            (b"gz", 1),
            (b"h", 2),
            (b"oz", 2),
            (b"p", 3),
            (b"\xfe", 3),
        ] {
            assert_eq!(routes.group_of(key), group, "{key:?}");
        }
        assert_eq!(routes.group_of_all([&b"a"[..], b"b"]), Ok(1));
        assert_eq!(routes.group_of_all([]), Ok(DEFAULT_GROUP));
        assert_eq!(
            routes.group_of_all([&b"q"[..], b"a", b"z"]),
            Err(ClientError::CrossShard { groups: vec![1, 3] })
        );
        assert_eq!(Routes::default().group_of(b"anything"), DEFAULT_GROUP);
    }

    #[test]
    fn a_map_that_misses_or_doubles_a_key_is_refused() {
        let bad = [
            vec![],
            vec![info(1, b"a", None)],
            vec![info(1, b"", Some(b"h"))],
            vec![info(1, b"", Some(b"h")), info(2, b"i", None)],
            vec![info(1, b"", Some(b"p")), info(2, b"h", None)],
        ];
        for shards in bad {
            let err = map(shards.clone()).expect_err("a bad map");
            assert!(matches!(err, ClientError::Server(_)), "{shards:?}: {err}");
        }
    }
}
