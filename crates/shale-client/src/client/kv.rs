//! The client's key-value requests: get, put, delete, batch, compare-and-set and scan.
//! Reads are linearizable; writes go in the client's session ([`Client::write`]).

use super::retry::Kind;
use super::Client;
use crate::error::ClientError;
use crate::pb;

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
            .call(Kind::Read, req, |mut c, r| async move { c.get(r).await })
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
            .write(req, |mut c, r| async move { c.put(r).await })
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
            .write(req, |mut c, r| async move { c.delete(r).await })
            .await?;
        Ok(resp.index)
    }

    /// Apply puts (`Some`) and deletes (`None`) atomically.
    ///
    /// # Errors
    /// See [`ClientError`].
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
        let resp = self
            .write(req, |mut c, r| async move { c.batch(r).await })
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
            .write(req, |mut c, r| async move { c.compare_and_set(r).await })
            .await?;
        Ok(CasOutcome {
            swapped: resp.swapped,
            current: resp.current,
        })
    }

    /// Up to `limit` pairs with `start <= key < end`, read linearizably, and where the next
    /// page starts if the range holds more.
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
        let req = || pb::ScanRequest {
            start: start.to_vec(),
            end: end.map(<[u8]>::to_vec),
            limit,
        };
        let resp = self
            .call(Kind::Read, req, |mut c, r| async move { c.scan(r).await })
            .await?;
        let pairs = resp.pairs.into_iter().map(|p| (p.key, p.value)).collect();
        Ok((pairs, resp.next_start))
    }
}
