//! Short byte strings kept inline: the keys of the term dictionary and of the stem cache.
//!
//! Most terms are a few bytes long. A hash table keyed by `Box<str>` reads each probed
//! key through a pointer, a cache miss per lookup once the table outgrows the cache; an
//! inline key is compared where the probe already is.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};

/// Bytes held inline up to this many (the type is 24 bytes either way).
pub const INLINE: usize = 22;

/// A byte string, inline when at most [`INLINE`] bytes long. Hashes and compares as the
/// `[u8]` it holds, so a table keyed by it is searched with a `&[u8]`.
#[derive(Clone)]
pub enum ShortBytes {
    Inline { len: u8, bytes: [u8; INLINE] },
    Boxed(Box<[u8]>),
}

impl ShortBytes {
    pub fn as_bytes(&self) -> &[u8] {
        match self {
            ShortBytes::Inline { len, bytes } => bytes.get(..usize::from(*len)).unwrap_or(&[]),
            ShortBytes::Boxed(b) => b,
        }
    }
}

impl From<&[u8]> for ShortBytes {
    fn from(from: &[u8]) -> ShortBytes {
        match u8::try_from(from.len()) {
            Ok(len) if from.len() <= INLINE => {
                let mut bytes = [0; INLINE];
                bytes
                    .iter_mut()
                    .zip(from)
                    .for_each(|(to, from)| *to = *from);
                ShortBytes::Inline { len, bytes }
            }
            _ => ShortBytes::Boxed(from.into()),
        }
    }
}

impl Borrow<[u8]> for ShortBytes {
    fn borrow(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl Hash for ShortBytes {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_bytes().hash(state);
    }
}

impl PartialEq for ShortBytes {
    fn eq(&self, other: &Self) -> bool {
        self.as_bytes() == other.as_bytes()
    }
}

impl Eq for ShortBytes {}

impl std::fmt::Debug for ShortBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn inline_and_boxed_keys_are_found_by_their_bytes() {
        assert_eq!(std::mem::size_of::<ShortBytes>(), 24);
        let mut m: HashMap<ShortBytes, usize> = HashMap::new();
        let words = [
            "",
            "a",
            "twenty-two bytes long.",
            "twenty-three bytes long",
            "ünïcödé",
        ];
        for (i, w) in words.iter().enumerate() {
            m.insert(w.as_bytes().into(), i);
        }
        for (i, w) in words.iter().enumerate() {
            assert_eq!(m.get(w.as_bytes()), Some(&i), "{w}");
        }
        assert!(matches!(
            ShortBytes::from(&b"twenty-two bytes long."[..]),
            ShortBytes::Inline { .. }
        ));
        assert!(matches!(
            ShortBytes::from(&b"twenty-three bytes long"[..]),
            ShortBytes::Boxed(_)
        ));
        assert_eq!(m.get(&b"twenty-two bytes long"[..]), None);
    }
}
