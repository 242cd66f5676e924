//! Writes in a session (docs/replication.md, "Exactly-once writes"): the client opens one
//! at its first write, numbers each write, and sends every try of a write with the same
//! number and the lowest number it still awaits.

use std::collections::BTreeSet;
use std::sync::MutexGuard;

use tonic::transport::Channel;
use tonic::Status;

use super::{Client, Kind};
use crate::error::ClientError;
use crate::pb;
use crate::pb::kv_client::KvClient;
use crate::wire::with_token;

/// The numbers of the writes in sessions: the next one, and those awaiting an answer.
#[derive(Default)]
pub(super) struct Numbers {
    last: u64,
    awaited: BTreeSet<u64>,
}

impl Client {
    fn numbers(&self) -> MutexGuard<'_, Numbers> {
        self.numbers.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The session writes go in, opened now if there is none.
    async fn session_id(&self, cell: &tokio::sync::Mutex<Option<u64>>) -> Result<u64, ClientError> {
        let mut id = cell.lock().await;
        if let Some(id) = *id {
            return Ok(id);
        }
        // An opening is retried like a write in a session: one opened twice leaves a
        // session nobody uses, closed in time like any other.
        let opened = self
            .call(Kind::SessionWrite, |mut c, token| {
                let req = with_token(pb::OpenSessionRequest {}, token.as_deref());
                async move { c.open_session(req).await }
            })
            .await?;
        *id = Some(opened.session);
        Ok(opened.session)
    }

    /// Send the write `f` builds (given its place in the session, if any): in the
    /// client's session, retried on every transient failure within the deadline.
    pub(super) async fn write<T, F, Fut>(&self, f: F) -> Result<T, ClientError>
    where
        F: Fn(KvClient<Channel>, Option<String>, Option<pb::SessionSeq>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let Some(cell) = &self.session else {
            return self.call(Kind::Write, |c, token| f(c, token, None)).await;
        };
        let seq = {
            let mut n = self.numbers();
            n.last += 1;
            let seq = n.last;
            n.awaited.insert(seq);
            seq
        };
        let result = self.write_numbered(cell, seq, &f).await;
        self.numbers().awaited.remove(&seq);
        result
    }

    async fn write_numbered<T, F, Fut>(
        &self,
        cell: &tokio::sync::Mutex<Option<u64>>,
        seq: u64,
        f: &F,
    ) -> Result<T, ClientError>
    where
        F: Fn(KvClient<Channel>, Option<String>, Option<pb::SessionSeq>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let mut reopened = false;
        loop {
            let session = self.session_id(cell).await?;
            let sent = self
                .call_counted(Kind::SessionWrite, |c, token| {
                    let lowest_awaited = self.numbers().awaited.first().copied().unwrap_or(seq);
                    let at = pb::SessionSeq {
                        session,
                        seq,
                        lowest_awaited,
                    };
                    f(c, token, Some(at))
                })
                .await;
            let expired = match sent {
                Ok(answer) => return Ok(answer),
                Err((ClientError::SessionExpired(why), tries)) => (why, tries),
                Err((e, _)) => return Err(e),
            };
            {
                let mut id = cell.lock().await;
                if *id == Some(session) {
                    *id = None;
                }
            }
            match expired {
                // Its only try found the session closed: nothing of this write applied,
                // so it goes again in a new session.
                (_, 1) if !reopened => reopened = true,
                (why, _) => {
                    return Err(ClientError::Ambiguous(format!(
                        "the session closed while the write was retried: {why}"
                    )))
                }
            }
        }
    }
}
