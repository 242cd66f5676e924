//! The Rust client: follows redirects to the leader and retries on a lost leader, within
//! a bounded deadline per call.
//!
//! Writes go in a session (docs/replication.md, "Exactly-once writes"): the client opens
//! one at its first write, numbers each write, and the cluster applies a number once, so
//! a write is retried on every transient failure, like a read, and a retry that finds the
//! write applied gets its first answer. The session is reopened if the cluster closed it
//! (it keeps the most recently used); a write whose retry finds its session closed
//! answers [`ClientError::Ambiguous`].
//!
//! Retry rules (the server's errors are listed in docs/replication.md, "Client API"):
//! - an error marked `shale-retry: safe` (a redirect from a node that was not the leader,
//!   no leader known) and a connection that was refused proposed nothing: every call
//!   follows or retries them;
//! - reads and writes in a session retry on every transient failure;
//! - without a session ([`Client::without_sessions`]), any other failure of a write may
//!   have been applied, and applying it again later would break linearizability (another
//!   client's write could fall between the two), so the write answers
//!   [`ClientError::Ambiguous`] and the caller decides (the client's next call goes to
//!   the leader the failed node named, else to the next endpoint).
//!
//! Thread safety: a `Client` is `Send + Sync`; calls may run concurrently.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tonic::transport::Channel;
use tonic::Status;

pub use crate::error::ClientError;
use crate::pb;
use crate::pb::kv_client::KvClient;
use crate::wire::{endpoint, with_token, LEADER_HEADER, MAX_MESSAGE_BYTES};

mod retry;
mod session;
use retry::{classify, Kind, Next};
use session::Session;

/// The longest pause between two tries: an election takes a few hundred milliseconds
/// (docs/replication.md), so a longer pause would mostly add to the client's failover time.
const MAX_RETRY_PAUSE: Duration = Duration::from_millis(100);

/// A compare-and-set's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CasOutcome {
    pub swapped: bool,
    /// The value before the call.
    pub current: Option<Vec<u8>>,
}

/// A client of a Shale cluster.
pub struct Client {
    endpoints: Vec<String>,
    token: Option<String>,
    tls: Option<tonic::transport::ClientTlsConfig>,
    deadline: Duration,
    state: Mutex<State>,
    /// The session writes go in; `None` without sessions.
    session: Option<Session>,
}

struct State {
    /// Where the next call goes first: the leader last seen, else an endpoint.
    target: String,
    /// The endpoint tried after a transient failure.
    next_endpoint: usize,
    channels: HashMap<String, Channel>,
}

impl Client {
    /// A client of the cluster whose nodes listen at `endpoints` (`host:port`), with a
    /// deadline of 10 s per call.
    ///
    /// # Errors
    /// `Config` for no endpoint.
    pub fn new(endpoints: Vec<String>, token: Option<String>) -> Result<Client, ClientError> {
        let Some(first) = endpoints.first().cloned() else {
            return Err(ClientError::Config("no endpoint".into()));
        };
        Ok(Client {
            endpoints,
            token,
            tls: None,
            deadline: Duration::from_secs(10),
            state: Mutex::new(State {
                target: first,
                next_endpoint: 0,
                channels: HashMap::new(),
            }),
            session: Some(Session::default()),
        })
    }

    /// Send writes without a session: a write whose outcome a failure leaves open is not
    /// retried but answers [`ClientError::Ambiguous`], and the client never adds a
    /// session's opening to the log.
    pub fn without_sessions(mut self) -> Client {
        self.session = None;
        self
    }

    /// Connect over TLS, trusting the cluster's certificate authority `ca_pem` (PEM), and
    /// checking each node's certificate against the host of its endpoint.
    pub fn with_tls(mut self, ca_pem: impl AsRef<[u8]>) -> Client {
        self.tls = Some(crate::wire::tls(ca_pem));
        self.state().channels.clear();
        self
    }

    /// The longest one call may take, retries included.
    pub fn with_deadline(mut self, deadline: Duration) -> Client {
        self.deadline = deadline;
        self
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn channel(&self, addr: &str) -> Result<Channel, ClientError> {
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

    async fn call<T, F, Fut>(&self, kind: Kind, f: F) -> Result<T, ClientError>
    where
        F: Fn(KvClient<Channel>, Option<String>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<T>, Status>>,
    {
        self.call_counted(kind, f).await.map_err(|(e, _)| e)
    }

    /// [`Client::call`], failing with the number of tries made.
    async fn call_counted<T, F, Fut>(&self, kind: Kind, f: F) -> Result<T, (ClientError, u32)>
    where
        F: Fn(KvClient<Channel>, Option<String>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<T>, Status>>,
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
            let attempt = tokio::time::timeout(remaining, f(client, self.token.clone())).await;
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
                    if matches!(e, ClientError::Ambiguous(_)) {
                        // The target lost its leadership with this write in flight: the
                        // caller's next call starts at the leader it named, else at the
                        // next endpoint, not at the node that just lost it.
                        match status
                            .metadata()
                            .get(LEADER_HEADER)
                            .and_then(|v| v.to_str().ok())
                        {
                            Some(leader) => self.state().target = leader.to_string(),
                            None => self.next_endpoint(),
                        }
                    }
                    return Err((e, tries));
                }
            }
        }
    }

    /// Send the write `f` builds (given its place in the session, if any): in the
    /// client's session, retried on every transient failure within the deadline.
    async fn write<T, F, Fut>(&self, f: F) -> Result<T, ClientError>
    where
        F: Fn(KvClient<Channel>, Option<String>, Option<pb::SessionSeq>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let Some(session) = &self.session else {
            return self.call(Kind::Write, |c, token| f(c, token, None)).await;
        };
        let seq = session.number();
        let result = self.write_numbered(session, seq, &f).await;
        session.answered(seq);
        result
    }

    /// Send the write numbered `seq` in `session`, reopening the session once if the
    /// cluster closed it before the write's first try.
    async fn write_numbered<T, F, Fut>(
        &self,
        session: &Session,
        seq: u64,
        f: &F,
    ) -> Result<T, ClientError>
    where
        F: Fn(KvClient<Channel>, Option<String>, Option<pb::SessionSeq>) -> Fut,
        Fut: std::future::Future<Output = Result<tonic::Response<T>, Status>>,
    {
        let mut reopened = false;
        loop {
            let id = session.id(|| self.open_session()).await?;
            let sent = self
                .call_counted(Kind::SessionWrite, |c, token| {
                    f(c, token, Some(session.at(id, seq)))
                })
                .await;
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
            .call(Kind::SessionWrite, |mut c, token| {
                let req = with_token(pb::OpenSessionRequest {}, token.as_deref());
                async move { c.open_session(req).await }
            })
            .await?;
        Ok(opened.session)
    }

    /// The value of `key`, read linearizably.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub async fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, ClientError> {
        let resp = self
            .call(Kind::Read, |mut c, token| {
                let req = with_token(pb::GetRequest { key: key.to_vec() }, token.as_deref());
                async move { c.get(req).await }
            })
            .await?;
        Ok(resp.value)
    }

    /// Set `key` to `value`; returns the log index it was applied at.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub async fn put(&self, key: &[u8], value: &[u8]) -> Result<u64, ClientError> {
        let resp = self
            .write(|mut c, token, session| {
                let req = with_token(
                    pb::PutRequest {
                        key: key.to_vec(),
                        value: value.to_vec(),
                        session,
                    },
                    token.as_deref(),
                );
                async move { c.put(req).await }
            })
            .await?;
        Ok(resp.index)
    }

    /// Remove `key`; returns the log index it was applied at.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub async fn delete(&self, key: &[u8]) -> Result<u64, ClientError> {
        let resp = self
            .write(|mut c, token, session| {
                let req = pb::DeleteRequest {
                    key: key.to_vec(),
                    session,
                };
                let req = with_token(req, token.as_deref());
                async move { c.delete(req).await }
            })
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
        let resp = self
            .write(|mut c, token, session| {
                let req = pb::BatchRequest {
                    ops: ops.clone(),
                    session,
                };
                let req = with_token(req, token.as_deref());
                async move { c.batch(req).await }
            })
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
        let resp = self
            .write(|mut c, token, session| {
                let req = with_token(
                    pb::CompareAndSetRequest {
                        key: key.to_vec(),
                        expected: expected.map(<[u8]>::to_vec),
                        new_value: new_value.map(<[u8]>::to_vec),
                        session,
                    },
                    token.as_deref(),
                );
                async move { c.compare_and_set(req).await }
            })
            .await?;
        Ok(CasOutcome {
            swapped: resp.swapped,
            current: resp.current,
        })
    }

    /// Create the vector index `name` over the keys under `prefix` on every replica;
    /// returns the log index it was applied at. Defining an index again as it is succeeds.
    /// Its values are then vector records (`shale_search::semantic::vector_value`) of `dim`
    /// components.
    ///
    /// # Errors
    /// `Refused` for a bad definition, a name taken by another definition, a prefix that
    /// shares keys with another index's or whose keys already hold values; see
    /// [`ClientError`].
    pub async fn define_index(
        &self,
        name: &str,
        prefix: &[u8],
        dim: u32,
        metric: pb::Metric,
    ) -> Result<u64, ClientError> {
        self.define_index_with(pb::DefineIndexRequest {
            name: name.to_owned(),
            prefix: prefix.to_vec(),
            dim,
            metric: metric.into(),
            model: pb::Model::Vectors.into(),
            ..Default::default()
        })
        .await
    }

    /// [`Client::define_index`] with every field of the request: an index with a model
    /// (`model`, `dim` its dimension) holds texts that every replica embeds, searched by
    /// text ([`Client::search_text`]) or vector.
    ///
    /// # Errors
    /// As [`Client::define_index`]; `Server` if the leader cannot load the model.
    pub async fn define_index_with(&self, req: pb::DefineIndexRequest) -> Result<u64, ClientError> {
        let resp = self
            .call(Kind::Write, |mut c, token| {
                let req = with_token(req.clone(), token.as_deref());
                async move { c.define_index(req).await }
            })
            .await?;
        Ok(resp.index)
    }

    /// The `k` values of index `index` nearest to `vector`, nearest first, read
    /// linearizably (the index holds every write acknowledged before the call).
    ///
    /// # Errors
    /// See [`ClientError`]; `Server` for an index that does not exist.
    pub async fn search(
        &self,
        index: &str,
        vector: &[f32],
        k: u32,
    ) -> Result<Vec<pb::SearchHit>, ClientError> {
        self.search_with(pb::SearchRequest {
            index: index.to_owned(),
            vector: vector.to_vec(),
            k,
            ..Default::default()
        })
        .await
    }

    /// The `k` values of index `index` (one with a model) nearest in meaning to `text`.
    ///
    /// # Errors
    /// As [`Client::search`]; `Refused` for an index without a model.
    pub async fn search_text(
        &self,
        index: &str,
        text: &str,
        k: u32,
    ) -> Result<Vec<pb::SearchHit>, ClientError> {
        self.search_by_text(index, text, k, pb::SearchMode::Meaning)
            .await
    }

    /// The `k` values of index `index` that best match `text` by keywords (BM25), read
    /// linearizably: exact and current at every acknowledged write.
    ///
    /// # Errors
    /// As [`Client::search`]; `Server` for an index defined without keywords.
    pub async fn search_keywords(
        &self,
        index: &str,
        text: &str,
        k: u32,
    ) -> Result<Vec<pb::SearchHit>, ClientError> {
        self.search_by_text(index, text, k, pb::SearchMode::Keywords)
            .await
    }

    /// The `k` values of index `index` that best match `text` by keywords and by meaning
    /// (its model embeds `text`), the two rankings fused by reciprocal rank.
    ///
    /// # Errors
    /// As [`Client::search_keywords`]; `Refused` for an index without a model.
    pub async fn search_hybrid(
        &self,
        index: &str,
        text: &str,
        k: u32,
    ) -> Result<Vec<pb::SearchHit>, ClientError> {
        self.search_by_text(index, text, k, pb::SearchMode::Hybrid)
            .await
    }

    async fn search_by_text(
        &self,
        index: &str,
        text: &str,
        k: u32,
        mode: pb::SearchMode,
    ) -> Result<Vec<pb::SearchHit>, ClientError> {
        self.search_with(pb::SearchRequest {
            index: index.to_owned(),
            text: Some(text.to_owned()),
            k,
            mode: mode.into(),
            ..Default::default()
        })
        .await
    }

    /// [`Client::search`] with every option of the request (`ef`, `exact`, a key range,
    /// the mode, keyword matching and fusion).
    ///
    /// # Errors
    /// As [`Client::search`].
    pub async fn search_with(
        &self,
        req: pb::SearchRequest,
    ) -> Result<Vec<pb::SearchHit>, ClientError> {
        let resp = self
            .call(Kind::Read, |mut c, token| {
                let req = with_token(req.clone(), token.as_deref());
                async move { c.search(req).await }
            })
            .await?;
        Ok(resp.hits)
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
        let resp = self
            .call(Kind::Read, |mut c, token| {
                let req = with_token(
                    pb::ScanRequest {
                        start: start.to_vec(),
                        end: end.map(<[u8]>::to_vec),
                        limit,
                    },
                    token.as_deref(),
                );
                async move { c.scan(req).await }
            })
            .await?;
        let pairs = resp.pairs.into_iter().map(|p| (p.key, p.value)).collect();
        Ok((pairs, resp.next_start))
    }

    /// Add node `node_id`, reachable at `addr`, as a learner; returns once it has caught up
    /// (within the client's deadline). Then [`Client::add_voters`] makes it a voter.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub async fn add_learner(
        &self,
        node_id: u64,
        addr: &str,
    ) -> Result<pb::MembershipResponse, ClientError> {
        self.call(Kind::Write, |mut c, token| {
            let req = with_token(
                pb::AddLearnerRequest {
                    node_id,
                    addr: addr.to_string(),
                },
                token.as_deref(),
            );
            async move { c.add_learner(req).await }
        })
        .await
    }

    /// Reach member `node_id` at `addr` from now on (it moved to another host or port):
    /// a membership change through the log. Refused if another member is at `addr`.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub async fn set_address(
        &self,
        node_id: u64,
        addr: &str,
    ) -> Result<pb::MembershipResponse, ClientError> {
        self.call(Kind::Write, |mut c, token| {
            let req = with_token(
                pb::SetAddressRequest {
                    node_id,
                    addr: addr.to_string(),
                },
                token.as_deref(),
            );
            async move { c.set_address(req).await }
        })
        .await
    }

    /// Hand the leadership to voter `node_id`; returns the term it leads in. The leader
    /// takes no request for the half second or so this takes (they are retried).
    ///
    /// # Errors
    /// See [`ClientError`]; `Refused` for a node that is not a voter.
    pub async fn transfer_leader(&self, node_id: u64) -> Result<u64, ClientError> {
        let resp = self
            .call(Kind::Write, |mut c, token| {
                let req = with_token(pb::TransferLeaderRequest { node_id }, token.as_deref());
                async move { c.transfer_leader(req).await }
            })
            .await?;
        Ok(resp.term)
    }

    /// Make learners voters.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub async fn add_voters(&self, ids: &[u64]) -> Result<pb::MembershipResponse, ClientError> {
        self.change_voters(ids, &[]).await
    }

    /// Remove voters from the cluster.
    ///
    /// # Errors
    /// See [`ClientError`].
    pub async fn remove_voters(&self, ids: &[u64]) -> Result<pb::MembershipResponse, ClientError> {
        self.change_voters(&[], ids).await
    }

    async fn change_voters(
        &self,
        add: &[u64],
        remove: &[u64],
    ) -> Result<pb::MembershipResponse, ClientError> {
        self.call(Kind::Write, |mut c, token| {
            let req = with_token(
                pb::ChangeVotersRequest {
                    add: add.to_vec(),
                    remove: remove.to_vec(),
                },
                token.as_deref(),
            );
            async move { c.change_voters(req).await }
        })
        .await
    }

    /// Write an online backup of the cluster to `path`: a snapshot file holding at least
    /// every write acknowledged before the call (`shale-server --restore` starts a new
    /// cluster from it). Written to `path` with `.tmp` appended, synced, then renamed;
    /// returns its size in bytes. The frames are checked by the restore, not here.
    ///
    /// # Errors
    /// See [`ClientError`]; `Config` for a file that cannot be written; `Server` for a
    /// stream that breaks off.
    pub async fn backup(&self, path: &std::path::Path) -> Result<u64, ClientError> {
        use std::io::Write;
        let mut stream = self
            .call(Kind::Read, |mut c, token| {
                let req = with_token(pb::BackupRequest {}, token.as_deref());
                async move { c.backup(req).await }
            })
            .await?;
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        let io = |e: std::io::Error| ClientError::Config(format!("{}: {e}", tmp.display()));
        let mut file = std::io::BufWriter::new(std::fs::File::create(&tmp).map_err(io)?);
        let mut bytes = 0u64;
        loop {
            let frame = match stream.message().await {
                Ok(Some(f)) => f.frame,
                Ok(None) => break,
                Err(s) => {
                    let _ = std::fs::remove_file(&tmp);
                    let why = format!("the backup broke off: {:?}: {}", s.code(), s.message());
                    return Err(ClientError::Server(why));
                }
            };
            file.write_all(&frame).map_err(io)?;
            bytes += frame.len() as u64;
        }
        let file = file.into_inner().map_err(|e| io(e.into_error()))?;
        file.sync_all().map_err(io)?;
        std::fs::rename(&tmp, path)
            .map_err(|e| ClientError::Config(format!("{}: {e}", path.display())))?;
        Ok(bytes)
    }

    /// One node's view of the cluster (not linearizable; no retry, no redirect).
    ///
    /// # Errors
    /// `Server` for any failure.
    pub async fn status_of(&self, addr: &str) -> Result<pb::StatusResponse, ClientError> {
        let mut c = KvClient::new(self.channel(addr)?);
        c.status(with_token(pb::StatusRequest {}, self.token.as_deref()))
            .await
            .map(tonic::Response::into_inner)
            .map_err(|s| ClientError::Server(format!("{addr}: {:?}: {}", s.code(), s.message())))
    }

    /// The shared handle for tasks.
    pub fn shared(self) -> Arc<Client> {
        Arc::new(self)
    }
}
