//! How a call reaches the cluster: the channel to each node, the node the next try goes
//! to, the tries of one call within its deadline, and the numbering of writes in the
//! session. Every request method of [`Client`] is one [`Client::call`] or
//! [`Client::write`]: it builds its message, names its RPC, and maps the answer.
//!
//! Thread safety: the state behind the client's mutex (target, next endpoint, channels)
//! is held only between awaits, never across one.

use std::future::Future;
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use tonic::transport::Channel;
use tonic::{Request, Response, Status};

use super::retry::{classify, Kind, Next};
use super::session::Session;
use super::{Client, State};
use crate::error::ClientError;
use crate::pb;
use crate::pb::kv_client::KvClient;
use crate::wire::{endpoint, with_token, LEADER_HEADER, MAX_MESSAGE_BYTES};

/// The longest pause between two tries: an election takes a few hundred milliseconds
/// (docs/replication.md), so a longer pause would mostly add to the client's failover time.
const MAX_RETRY_PAUSE: Duration = Duration::from_millis(100);

impl Client {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn channel(&self, addr: &str) -> Result<Channel, ClientError> {
        let mut st = self.state();
        if let Some(c) = st.channels.get(addr) {
            return Ok(c.clone());
        }
        let channel = endpoint(addr, self.tls.as_ref())
            .map_err(ClientError::Config)?
            .connect_lazy();
        st.channels.insert(addr.to_string(), channel.clone());
        Ok(channel)
    }

    /// Aim the next attempt at the endpoint after the last one tried.
    fn next_endpoint(&self) {
        let mut st = self.state();
        st.next_endpoint = (st.next_endpoint + 1) % self.endpoints.len().max(1);
        if let Some(next) = self.endpoints.get(st.next_endpoint) {
            st.target = next.clone();
        }
    }

    /// Send the message `req` builds, with the client's token, by the RPC `send` makes
    /// (`|mut c, r| async move { c.get(r).await }`), following redirects and retrying as
    /// `kind` allows within the deadline; the answer's message.
    pub(super) async fn call<Req, T, Fut>(
        &self,
        kind: Kind,
        req: impl Fn() -> Req,
        send: impl Fn(KvClient<Channel>, Request<Req>) -> Fut,
    ) -> Result<T, ClientError>
    where
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        self.call_counted(kind, &req, &send)
            .await
            .map_err(|(e, _)| e)
    }

    /// [`Client::call`], failing with the number of tries made.
    async fn call_counted<Req, T, Fut>(
        &self,
        kind: Kind,
        req: &impl Fn() -> Req,
        send: &impl Fn(KvClient<Channel>, Request<Req>) -> Fut,
    ) -> Result<T, (ClientError, u32)>
    where
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        let mut tries = 0u32;
        let start = Instant::now();
        let mut pause = Duration::from_millis(20);
        let mut last = String::from("no attempt");
        loop {
            let remaining = self.deadline.saturating_sub(start.elapsed());
            if remaining.is_zero() {
                return Err((ClientError::Timeout { last }, tries));
            }
            let target = self.state().target.clone();
            let channel = self.channel(&target).map_err(|e| (e, tries))?;
            tries += 1;
            let client = KvClient::new(channel)
                .max_decoding_message_size(MAX_MESSAGE_BYTES)
                .max_encoding_message_size(MAX_MESSAGE_BYTES);
            let request = with_token(req(), self.token.as_deref());
            let attempt = tokio::time::timeout(remaining, send(client, request)).await;
            let status = match attempt {
                Ok(Ok(resp)) => return Ok(resp.into_inner()),
                Ok(Err(status)) => status,
                Err(_) => return Err((ClientError::Timeout { last }, tries)),
            };
            last = format!("{target}: {:?}: {}", status.code(), status.message());
            match classify(&status, kind) {
                Next::Redirect(addr) => {
                    self.state().target = addr;
                }
                Next::Retry => {
                    self.next_endpoint();
                    tokio::time::sleep(pause.min(self.deadline.saturating_sub(start.elapsed())))
                        .await;
                    pause = (pause * 2).min(MAX_RETRY_PAUSE);
                }
                Next::Fail(e) => {
                    self.after_failure(&e, &status);
                    return Err((e, tries));
                }
            }
        }
    }

    /// Where the next call starts after one failed with `e` on `status`.
    fn after_failure(&self, e: &ClientError, status: &Status) {
        if matches!(e, ClientError::Ambiguous(_)) {
            // The target lost its leadership with this write in flight: the caller's next
            // call starts at the leader it named, else at the next endpoint, not at the
            // node that just lost it.
            match status
                .metadata()
                .get(LEADER_HEADER)
                .and_then(|v| v.to_str().ok())
            {
                Some(leader) => self.state().target = leader.to_string(),
                None => self.next_endpoint(),
            }
        }
    }

    /// Send the write whose message `req` builds (given its place in the session, if any)
    /// by the RPC `send` makes: in the client's session, retried on every transient
    /// failure within the deadline.
    pub(super) async fn write<Req, T, Fut>(
        &self,
        req: impl Fn(Option<pb::SessionSeq>) -> Req,
        send: impl Fn(KvClient<Channel>, Request<Req>) -> Fut,
    ) -> Result<T, ClientError>
    where
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        let Some(session) = &self.session else {
            return self.call(Kind::Write, || req(None), send).await;
        };
        let seq = session.number();
        let result = self.write_numbered(session, seq, &req, &send).await;
        session.answered(seq);
        result
    }

    /// Send the write numbered `seq` in `session`, reopening the session once if the
    /// cluster closed it before the write's first try.
    async fn write_numbered<Req, T, Fut>(
        &self,
        session: &Session,
        seq: u64,
        req: &impl Fn(Option<pb::SessionSeq>) -> Req,
        send: &impl Fn(KvClient<Channel>, Request<Req>) -> Fut,
    ) -> Result<T, ClientError>
    where
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        let mut reopened = false;
        loop {
            let id = session.id(|| self.open_session()).await?;
            let numbered = || req(Some(session.at(id, seq)));
            let sent = self.call_counted(Kind::SessionWrite, &numbered, send).await;
            let expired = match sent {
                Ok(answer) => return Ok(answer),
                Err((ClientError::SessionExpired(why), tries)) => (why, tries),
                Err((e, _)) => return Err(e),
            };
            session.closed(id).await;
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

    /// Open a session; its id.
    async fn open_session(&self) -> Result<u64, ClientError> {
        // An opening is retried like a write in a session: one opened twice leaves a
        // session nobody uses, closed in time like any other.
        let opened = self
            .call(
                Kind::SessionWrite,
                || pb::OpenSessionRequest {},
                |mut c, r| async move { c.open_session(r).await },
            )
            .await?;
        Ok(opened.session)
    }
}
