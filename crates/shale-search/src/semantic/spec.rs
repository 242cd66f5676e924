//! What a value under an index's prefix may be (`Spec`): the checks the write hook makes
//! before a batch commits, and what each value becomes in the index.

use super::pending::Payload;
use super::value::decode_vector_value;
use crate::vector::Metric;
use shale::error::{Error, Result};

/// What a value under an index's prefix may be, and the checks the hook makes.
#[derive(Debug, Clone)]
pub(super) struct Spec {
    pub name: String,
    /// The keyspace of the keys it covers.
    pub keyspace: shale::KeyspaceId,
    pub prefix: Vec<u8>,
    pub dim: usize,
    pub metric: Metric,
    pub has_embedder: bool,
}

impl Spec {
    /// What `value` under key `key` becomes in the index, or why it cannot be indexed.
    pub(super) fn payload(&self, key: &[u8], value: &[u8]) -> Result<Payload> {
        match decode_vector_value(value) {
            Some(Ok(v)) => match self.metric.check(&v.vector, self.dim, "its vector") {
                Ok(()) => Ok(Payload::Vector(v.vector)),
                Err(Error::InvalidArgument(why)) => {
                    Err(self.refuse(key, &format!("a vector value: {why}")))
                }
                Err(e) => Err(e),
            },
            Some(Err(why)) => Err(self.refuse(
                key,
                &format!("neither UTF-8 text nor a well-formed vector value ({why})"),
            )),
            None => match std::str::from_utf8(value) {
                Ok(text) if self.has_embedder => Ok(Payload::Text(text.to_owned())),
                Ok(_) => Err(self.refuse(
                    key,
                    "text, and the index has no embedder (put vectors with put_vector)",
                )),
                Err(e) => Err(self.refuse(
                    key,
                    &format!(
                        "neither UTF-8 text (invalid byte at {}) nor a vector value",
                        e.valid_up_to()
                    ),
                )),
            },
        }
    }

    fn refuse(&self, key: &[u8], why: &str) -> Error {
        Error::invalid(format!(
            "the value of key {:?} is {why}, and the key is in index {:?} (prefix {:?}); \
             nothing was written",
            String::from_utf8_lossy(key),
            self.name,
            String::from_utf8_lossy(&self.prefix)
        ))
    }

    /// A vector the index can hold: its dimension, finite, and (cosine) a direction.
    pub(super) fn check_vector(&self, v: &[f32]) -> Result<()> {
        self.metric
            .check(v, self.dim, "the vector")
            .map_err(|e| match e {
                Error::InvalidArgument(why) => {
                    Error::InvalidArgument(format!("{why} (index {:?})", self.name))
                }
                e => e,
            })
    }

    pub(super) fn covers(&self, key: &[u8]) -> bool {
        key.starts_with(&self.prefix)
    }

    /// Whether some key of `[start, end)` starts with the prefix.
    pub(super) fn meets_range(&self, start: &[u8], end: &[u8]) -> bool {
        let below_prefix_end = match shale::prefix_successor(&self.prefix) {
            Some(prefix_end) => start < prefix_end.as_slice(),
            None => true,
        };
        below_prefix_end && end > self.prefix.as_slice() && start < end
    }
}
