//! How a call reaches the cluster: the channel to each node, the node each group's next
//! try goes to, the group a request's keys route to, the tries of one call within its
//! deadline, and the numbering of writes in the group's session. Every request method of
//! [`Client`] is one [`Client::call`], [`Client::routed`] or [`Client::write`]: it builds
//! its message, names its RPC, and maps the answer.
//!
//! Thread safety: the state behind the client's mutex (targets, next endpoint, channels,
//! shard map) is held only between awaits, never across one.

use std::future::Future;
use std::sync::MutexGuard;
use std::time::{Duration, Instant};

use tonic::transport::Channel;
use tonic::{Request, Response, Status};

use super::retry::{classify, Kind, Next};
use super::routes::{Routes, DEFAULT_GROUP};
use super::session::Session;
use super::{Client, State};
use crate::error::ClientError;
use crate::pb;
use crate::pb::kv_client::KvClient;
use crate::wire::{endpoint, with_token, GROUP_HEADER, LEADER_HEADER, MAX_MESSAGE_BYTES};

/// The first pause before a retry; each next one doubles, up to [`MAX_RETRY_PAUSE`].
const FIRST_RETRY_PAUSE: Duration = Duration::from_millis(20);

/// The longest pause between two tries: an election takes a few hundred milliseconds
/// (docs/replication.md), so a longer pause would mostly add to the client's failover time.
const MAX_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// The longest a fetch of the shard map may take, within the call's deadline.
const SHARD_MAP_WAIT: Duration = Duration::from_secs(1);

/// How the tries of a call in one group ended without an answer.
enum Failed {
    /// An error for the caller, after this many tries.
    Error(ClientError, u32),
    /// The node at `at` does not serve the request's keys in that group: nothing was
    /// applied or read, and the request goes again from a fresh shard map.
    Moved { at: String, why: String },
}

impl Failed {
    fn error(e: ClientError) -> Failed {
        Failed::Error(e, 0)
    }
}

/// The pause before the next try, growing from [`FIRST_RETRY_PAUSE`] to [`MAX_RETRY_PAUSE`].
struct Backoff(Duration);

impl Backoff {
    fn new() -> Backoff {
        Backoff(FIRST_RETRY_PAUSE)
    }

    /// Sleep the pause (never past `deadline` after `started`), then double it.
    async fn pause(&mut self, started: Instant, deadline: Duration) {
        tokio::time::sleep(self.0.min(deadline.saturating_sub(started.elapsed()))).await;
        self.0 = (self.0 * 2).min(MAX_RETRY_PAUSE);
    }
}

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

    /// Where `group`'s next try goes: its leader last seen, else the current endpoint.
    fn target(&self, group: u64) -> String {
        let st = self.state();
        st.targets
            .get(&group)
            .or_else(|| self.endpoints.get(st.next_endpoint))
            .cloned()
            .unwrap_or_default()
    }

    /// Aim `group`'s next try at the endpoint after the last one tried.
    fn next_endpoint(&self, group: u64) {
        let mut st = self.state();
        st.next_endpoint = (st.next_endpoint + 1) % self.endpoints.len().max(1);
        if let Some(next) = self.endpoints.get(st.next_endpoint).cloned() {
            st.targets.insert(group, next);
        }
    }

    /// A client of the node at `target`, for requests of any size the cluster takes.
    fn node(&self, target: &str) -> Result<KvClient<Channel>, ClientError> {
        Ok(KvClient::new(self.channel(target)?)
            .max_decoding_message_size(MAX_MESSAGE_BYTES)
            .max_encoding_message_size(MAX_MESSAGE_BYTES))
    }

    /// Send the message `req` builds to group 1, which runs the cluster (membership,
    /// status, backup, indexes), with the client's token, by the RPC `send` makes
    /// (`|mut c, r| async move { c.status(r).await }`), following redirects and retrying
    /// as `kind` allows within the deadline; the answer's message.
    pub(super) async fn call<Req, T, Fut>(
        &self,
        kind: Kind,
        req: impl Fn() -> Req,
        send: impl Fn(KvClient<Channel>, Request<Req>) -> Fut,
    ) -> Result<T, ClientError>
    where
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        self.call_in(DEFAULT_GROUP, kind, req, send).await
    }

    /// [`Client::call`] to group `group`.
    pub(super) async fn call_in<Req, T, Fut>(
        &self,
        group: u64,
        kind: Kind,
        req: impl Fn() -> Req,
        send: impl Fn(KvClient<Channel>, Request<Req>) -> Fut,
    ) -> Result<T, ClientError>
    where
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        match self.tries(group, kind, Instant::now(), &req, &send).await {
            Ok(answer) => Ok(answer),
            Err(Failed::Error(e, _)) => Err(e),
            Err(Failed::Moved { why, .. }) => Err(ClientError::Server(why)),
        }
    }

    /// [`Client::call`] to the group whose shard holds every key of `keys`, routed again
    /// whenever a node says the group does not serve them.
    ///
    /// # Errors
    /// `CrossShard` if the keys lie in more than one shard; else as [`Client::call`].
    pub(super) async fn routed<Req, T, Fut>(
        &self,
        kind: Kind,
        keys: &[&[u8]],
        req: impl Fn() -> Req,
        send: impl Fn(KvClient<Channel>, Request<Req>) -> Fut,
    ) -> Result<T, ClientError>
    where
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        let (req, send) = (&req, &send);
        self.route(keys, move |group, started| {
            self.tries(group, kind, started, req, send)
        })
        .await
    }

    /// Run `attempt` (a request's tries in one group, within the deadline counted from the
    /// instant it is given) at the group whose shard holds every key of `keys`, and again
    /// at the group a fresh map names whenever a node says the group does not serve them.
    ///
    /// # Errors
    /// `CrossShard` if the keys lie in more than one shard; what `attempt` fails with;
    /// `Timeout` once the deadline passes while the request is routed again.
    async fn route<T, Fut>(
        &self,
        keys: &[&[u8]],
        attempt: impl Fn(u64, Instant) -> Fut,
    ) -> Result<T, ClientError>
    where
        Fut: Future<Output = Result<T, Failed>>,
    {
        let started = Instant::now();
        let mut backoff = Backoff::new();
        loop {
            let group = self.group_of(keys)?;
            match attempt(group, started).await {
                Ok(answer) => return Ok(answer),
                Err(Failed::Error(e, _)) => return Err(e),
                Err(Failed::Moved { at, why }) => {
                    self.reroute(&at, why, started, &mut backoff).await?;
                }
            }
        }
    }

    /// The one group whose shard holds every key of `keys`, from the client's map.
    fn group_of(&self, keys: &[&[u8]]) -> Result<u64, ClientError> {
        self.state().routes.group_of_all(keys.iter().copied())
    }

    /// After a node at `at` refused a request as outside its group (`why`): fetch the
    /// map from that node and, if it did not change, pause before the request goes again
    /// (the node may lag behind the group that now serves the keys).
    ///
    /// # Errors
    /// `Timeout` once the deadline has passed.
    async fn reroute(
        &self,
        at: &str,
        why: String,
        started: Instant,
        backoff: &mut Backoff,
    ) -> Result<(), ClientError> {
        let remaining = self.deadline.saturating_sub(started.elapsed());
        if remaining.is_zero() {
            return Err(ClientError::Timeout {
                last: format!("{at}: {why}"),
            });
        }
        if !self.fetch_routes(at, remaining.min(SHARD_MAP_WAIT)).await {
            backoff.pause(started, self.deadline).await;
        }
        Ok(())
    }

    /// Fetch the shard map from the node at `at`, waiting at most `wait`; whether the
    /// client's map changed. A failed fetch changes nothing (the request's next try
    /// fetches again).
    pub(super) async fn fetch_routes(&self, at: &str, wait: Duration) -> bool {
        let Ok(mut node) = self.node(at) else {
            return false;
        };
        let req = with_token(pb::ShardMapRequest {}, self.token.as_deref());
        let answer = tokio::time::timeout(wait, node.shard_map(req)).await;
        let Ok(Ok(map)) = answer else {
            return false;
        };
        let Ok(routes) = Routes::from_map(map.into_inner()) else {
            return false;
        };
        self.take_routes(routes)
    }

    /// Make `routes` the client's map, and each group's leader it names the group's next
    /// target; whether a shard changed.
    pub(super) fn take_routes(&self, routes: Routes) -> bool {
        let mut st = self.state();
        for shard in routes.shards() {
            if let Some(leader) = &shard.leader_addr {
                st.targets.insert(shard.group, leader.clone());
            }
        }
        let changed = !st.routes.same_shards(&routes);
        st.routes = routes;
        changed
    }

    /// Send the message `req` builds to `group` as [`Client::call`] does, within the
    /// deadline counted from `started`; how the tries ended.
    async fn tries<Req, T, Fut>(
        &self,
        group: u64,
        kind: Kind,
        started: Instant,
        req: &impl Fn() -> Req,
        send: &impl Fn(KvClient<Channel>, Request<Req>) -> Fut,
    ) -> Result<T, Failed>
    where
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        let mut tries = 0u32;
        let mut backoff = Backoff::new();
        let mut last = String::from("no attempt");
        loop {
            let remaining = self.deadline.saturating_sub(started.elapsed());
            if remaining.is_zero() {
                return Err(Failed::Error(ClientError::Timeout { last }, tries));
            }
            let target = self.target(group);
            let client = self.node(&target).map_err(|e| Failed::Error(e, tries))?;
            tries += 1;
            let mut request = with_token(req(), self.token.as_deref());
            request.metadata_mut().insert(GROUP_HEADER, group.into());
            let attempt = tokio::time::timeout(remaining, send(client, request)).await;
            let status = match attempt {
                Ok(Ok(resp)) => return Ok(resp.into_inner()),
                Ok(Err(status)) => status,
                Err(_) => return Err(Failed::Error(ClientError::Timeout { last }, tries)),
            };
            last = format!("{target}: {:?}: {}", status.code(), status.message());
            match classify(&status, kind) {
                Next::Redirect(addr) => {
                    self.state().targets.insert(group, addr);
                }
                Next::Retry => {
                    self.next_endpoint(group);
                    backoff.pause(started, self.deadline).await;
                }
                Next::Moved(why) => return Err(Failed::Moved { at: target, why }),
                Next::Fail(e) => {
                    self.after_failure(group, &e, &status);
                    return Err(Failed::Error(e, tries));
                }
            }
        }
    }

    /// Where `group`'s next call starts after one failed with `e` on `status`.
    fn after_failure(&self, group: u64, e: &ClientError, status: &Status) {
        if matches!(e, ClientError::Ambiguous(_)) {
            // The target lost its leadership with this write in flight: the caller's next
            // call starts at the leader it named, else at the next endpoint, not at the
            // node that just lost it.
            match status
                .metadata()
                .get(LEADER_HEADER)
                .and_then(|v| v.to_str().ok())
            {
                Some(leader) => {
                    self.state().targets.insert(group, leader.to_string());
                }
                None => self.next_endpoint(group),
            }
        }
    }

    /// Send the write whose message `req` builds (given its place in the session, if any)
    /// by the RPC `send` makes, to the group whose shard holds every key of `keys`: in the
    /// group's session, retried on every transient failure within the deadline, routed
    /// again whenever a node says the group does not serve the keys.
    ///
    /// # Errors
    /// `CrossShard` if the keys lie in more than one shard; see [`ClientError`].
    pub(super) async fn write<Req, T, Fut>(
        &self,
        keys: &[&[u8]],
        req: impl Fn(Option<pb::SessionSeq>) -> Req,
        send: impl Fn(KvClient<Channel>, Request<Req>) -> Fut,
    ) -> Result<T, ClientError>
    where
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        let (req, send) = (&req, &send);
        self.route(keys, move |group, started| {
            self.write_in(group, started, req, send)
        })
        .await
    }

    /// The tries of a write in `group`: in the group's session, if the client has them.
    async fn write_in<Req, T, Fut>(
        &self,
        group: u64,
        started: Instant,
        req: &impl Fn(Option<pb::SessionSeq>) -> Req,
        send: &impl Fn(KvClient<Channel>, Request<Req>) -> Fut,
    ) -> Result<T, Failed>
    where
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        let Some(sessions) = &self.sessions else {
            let bare = || req(None);
            return self.tries(group, Kind::Write, started, &bare, send).await;
        };
        let session = sessions.of(group);
        let seq = session.number();
        let sent = self
            .write_numbered(group, &session, seq, started, req, send)
            .await;
        session.answered(seq);
        sent
    }

    /// Send the write numbered `seq` in `group`'s `session`, reopening the session once if
    /// the cluster closed it before the write's first try.
    async fn write_numbered<Req, T, Fut>(
        &self,
        group: u64,
        session: &Session,
        seq: u64,
        started: Instant,
        req: &impl Fn(Option<pb::SessionSeq>) -> Req,
        send: &impl Fn(KvClient<Channel>, Request<Req>) -> Fut,
    ) -> Result<T, Failed>
    where
        Fut: Future<Output = Result<Response<T>, Status>>,
    {
        let mut reopened = false;
        loop {
            let id = session.id(|| self.open_session(group, started)).await?;
            let numbered = || req(Some(session.at(id, seq)));
            let sent = self
                .tries(group, Kind::SessionWrite, started, &numbered, send)
                .await;
            let expired = match sent {
                Err(Failed::Error(ClientError::SessionExpired(why), tries)) => (why, tries),
                other => return other,
            };
            session.closed(id).await;
            match expired {
                // Its only try found the session closed: nothing of this write applied,
                // so it goes again in a new session.
                (_, 1) if !reopened => reopened = true,
                (why, _) => {
                    return Err(Failed::error(ClientError::Ambiguous(format!(
                        "the session closed while the write was retried: {why}"
                    ))))
                }
            }
        }
    }

    /// Open a session in `group`; its id.
    async fn open_session(&self, group: u64, started: Instant) -> Result<u64, Failed> {
        // An opening is retried like a write in a session: one opened twice leaves a
        // session nobody uses, closed in time like any other.
        let open = || pb::OpenSessionRequest {};
        let opened = self
            .tries(
                group,
                Kind::SessionWrite,
                started,
                &open,
                &|mut c, r| async move { c.open_session(r).await },
            )
            .await?;
        Ok(opened.session)
    }
}
