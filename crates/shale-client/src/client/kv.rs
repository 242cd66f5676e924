//! The client's key-value requests: get, put, delete, batch, compare-and-set and scan,
//! each sent to the group whose shard holds its keys. Reads are linearizable; writes go
//! in the group's session ([`Client::write`]).

use super::retry::Kind;
use super::Client;
use crate::error::ClientError;
use crate::pb;
use crate::wire::{MAX_SCAN_BYTES, MAX_SCAN_PAIRS};

/// A compare-and-set's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CasOutcome {
    pub swapped: bool,
    /// The value before the call.
    pub current: Option<Vec<u8>>,
}

impl Client {
    /// The value of `key`, read linearizably.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, ClientError> {
        let req = || pb::GetRequest { key: key.to_vec() };
        let resp = self
            .routed(
                Kind::Read,
                &[key],
                req,
                |mut c, r| async move { c.get(r).await },
            )
            .await?;
        Ok(resp.value)
    }

    /// Set `key` to `value`; returns the log index it was applied at.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub async fn put(&self, key: &[u8], value: &[u8]) -> Result<u64, ClientError> {
        let req = |session| pb::PutRequest {
            key: key.to_vec(),
            value: value.to_vec(),
            session,
        };
        let resp = self
            .write(&[key], req, |mut c, r| async move { c.put(r).await })
            .await?;
        Ok(resp.index)
    }

    /// Remove `key`; returns the log index it was applied at.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub async fn delete(&self, key: &[u8]) -> Result<u64, ClientError> {
        let req = |session| pb::DeleteRequest {
            key: key.to_vec(),
            session,
        };
        let resp = self
            .write(&[key], req, |mut c, r| async move { c.delete(r).await })
            .await?;
        Ok(resp.index)
    }

    /// Apply puts (`Some`) and deletes (`None`) atomically.
    ///
    /// # Errors
    /// `CrossShard` if the keys lie in more than one shard (nothing is applied); see
    /// [`ClientError`].
    pub async fn batch(&self, ops: &[(Vec<u8>, Option<Vec<u8>>)]) -> Result<u64, ClientError> {
        let ops: Vec<pb::Op> = ops
            .iter()
            .map(|(key, value)| pb::Op {
                key: key.clone(),
                value: value.clone(),
            })
            .collect();
        let req = |session| pb::BatchRequest {
            ops: ops.clone(),
            session,
        };
        let keys: Vec<&[u8]> = ops.iter().map(|op| op.key.as_slice()).collect();
        let resp = self
            .write(&keys, req, |mut c, r| async move { c.batch(r).await })
            .await?;
        Ok(resp.index)
    }

    /// Set `key` to `new_value` (delete it for `None`) if its value is `expected` (`None`:
    /// absent).
    ///
    /// # Errors
    /// See [`ClientError`].
    pub async fn compare_and_set(
        &self,
        key: &[u8],
        expected: Option<&[u8]>,
        new_value: Option<&[u8]>,
    ) -> Result<CasOutcome, ClientError> {
        let req = |session| pb::CompareAndSetRequest {
            key: key.to_vec(),
            expected: expected.map(<[u8]>::to_vec),
            new_value: new_value.map(<[u8]>::to_vec),
            session,
        };
        let resp = self
            .write(
                &[key],
                req,
                |mut c, r| async move { c.compare_and_set(r).await },
            )
            .await?;
        Ok(CasOutcome {
            swapped: resp.swapped,
            current: resp.current,
        })
    }

    /// Up to `limit` pairs with `start <= key < end` (0: as many as one page holds, see
    /// [`MAX_SCAN_PAIRS`]), and where the next page starts if the range holds more. The
    /// page reads the shards the range overlaps in key order, each linearizably (a page
    /// that spans shards is not one snapshot); it ends early, before `limit`, once it
    /// holds [`MAX_SCAN_BYTES`].
    ///
    /// # Errors
    /// See [`ClientError`].
    #[allow(clippy::type_complexity)]
    pub async fn scan(
        &self,
        start: &[u8],
        end: Option<&[u8]>,
        limit: u32,
    ) -> Result<(Vec<(Vec<u8>, Vec<u8>)>, Option<Vec<u8>>), ClientError> {
        let want = match limit {
            0 => MAX_SCAN_PAIRS,
            n => n.min(MAX_SCAN_PAIRS),
        };
        let mut pairs = Vec::new();
        let mut bytes = 0usize;
        let mut from = start.to_vec();
        loop {
            let left = want.saturating_sub(u32::try_from(pairs.len()).unwrap_or(u32::MAX));
            let req = || pb::ScanRequest {
                start: from.clone(),
                end: end.map(<[u8]>::to_vec),
                limit: left,
            };
            let resp = self
                .routed(Kind::Read, &[&from], req, |mut c, r| async move {
                    c.scan(r).await
                })
                .await?;
            for p in resp.pairs {
                bytes = bytes.saturating_add(p.key.len() + p.value.len());
                pairs.push((p.key, p.value));
            }
            // A node's page stops at its shard's end, or at its own bounds.
            match resp.next_start {
                Some(next) if pairs.len() < want as usize && bytes < MAX_SCAN_BYTES => {
                    from = next;
                }
                next => return Ok((pairs, next)),
            }
        }
    }
}
