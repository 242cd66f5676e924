//! A group's shard: the range of keys its state machine serves, and the version of that
//! range. A group that was never split serves every key ([`Shard::whole`]); a split gives
//! each half a narrower range and a higher version, so that a client whose map names an
//! older version learns that its map is out of date.
//!
//! Thread safety: a value type.

/// The keys `[start, end)` a group serves (`end: None`: to the end of the key space), and
/// the range's version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shard {
    pub start: Vec<u8>,
    pub end: Option<Vec<u8>>,
    /// Raised by every change of the range.
    pub version: u64,
}

impl Shard {
    /// Every key, at version 0: the shard of a group that was never split.
    pub fn whole() -> Shard {
        Shard {
            start: Vec::new(),
            end: None,
            version: 0,
        }
    }

    /// Whether the shard serves `key`.
    pub fn contains(&self, key: &[u8]) -> bool {
        key >= self.start.as_slice() && self.end.as_deref().is_none_or(|end| key < end)
    }

    /// The first of `keys` the shard does not serve.
    pub fn first_outside<'k>(&self, mut keys: impl Iterator<Item = &'k [u8]>) -> Option<&'k [u8]> {
        keys.find(|k| !self.contains(k))
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[\"{}\", ", self.start.escape_ascii())?;
        match &self.end {
            Some(end) => write!(f, "\"{}\")", end.escape_ascii())?,
            None => f.write_str("end)")?,
        }
        write!(f, " version {}", self.version)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shard_holds_its_start_and_not_its_end() {
        let s = Shard {
            start: b"b".to_vec(),
            end: Some(b"d".to_vec()),
            version: 2,
        };
        assert!(s.contains(b"b") && s.contains(b"c\xff") && !s.contains(b"d"));
        assert!(!s.contains(b"a\xff") && !s.contains(b""));
        let keys: [&[u8]; 3] = [b"b", b"c", b"e"];
        assert_eq!(s.first_outside(keys.into_iter()), Some(&b"e"[..]));
        assert_eq!(s.to_string(), "[\"b\", \"d\") version 2");
        assert!(Shard::whole().contains(b"") && Shard::whole().contains(&[0xff; 40]));
        assert_eq!(Shard::whole().to_string(), "[\"\", end) version 0");
    }
}
