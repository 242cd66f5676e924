//! The Rust client: follows redirects to the leader and retries on a lost leader, within
//! a bounded deadline per call.
//!
//! A request goes to the group whose shard holds its keys (`routes.rs`): the client keeps
//! a copy of the shard map, fetched again when a node refuses a request as sent to the
//! wrong group, and follows each group's leader on its own. An atomic batch whose keys lie
//! in more than one shard is refused before it is sent ([`ClientError::CrossShard`]); a
//! scan reads the shards its range overlaps in key order.
//!
//! Writes go in a session (docs/replication.md, "Exactly-once writes"), one per group: the
//! client opens one at its first write to the group, numbers each write, and the cluster
//! applies a number once, so
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
//!
//! The rooms: `call.rs` the connection and retry machinery every request goes through,
//! `retry.rs` how a failed try goes on, `routes.rs` the shard map, `session.rs` the
//! sessions' numbers; the request
//! methods by what they touch, `kv.rs` (keys and values), `search.rs` (vector indexes)
//! and `admin.rs` (membership, leadership, backup, status).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tonic::transport::Channel;

pub use crate::error::ClientError;

mod admin;
mod call;
mod kv;
mod retry;
mod routes;
mod search;
mod session;
pub use admin::MOVE_CATCH_UP;
pub use kv::CasOutcome;
use routes::Routes;
pub use routes::{Shard, DEFAULT_GROUP};
use session::Sessions;

/// A client of a Shale cluster.
pub struct Client {
    endpoints: Vec<String>,
    token: Option<String>,
    tls: Option<tonic::transport::ClientTlsConfig>,
    deadline: Duration,
    state: Mutex<State>,
    /// The sessions writes go in, one per group; `None` without sessions.
    sessions: Option<Sessions>,
}

struct State {
    /// Where a group's next call goes first: its leader last seen, else an endpoint.
    targets: HashMap<u64, String>,
    /// The endpoint tried after a transient failure.
    next_endpoint: usize,
    channels: HashMap<String, Channel>,
    routes: Routes,
}

impl Client {
    /// A client of the cluster whose nodes listen at `endpoints` (`host:port`), with a
    /// deadline of 10 s per call.
    ///
    /// # Errors
    /// `Config` for no endpoint.
    pub fn new(endpoints: Vec<String>, token: Option<String>) -> Result<Client, ClientError> {
        if endpoints.is_empty() {
            return Err(ClientError::Config("no endpoint".into()));
        }
        Ok(Client {
            endpoints,
            token,
            tls: None,
            deadline: Duration::from_secs(10),
            state: Mutex::new(State {
                targets: HashMap::new(),
                next_endpoint: 0,
                channels: HashMap::new(),
                routes: Routes::default(),
            }),
            sessions: Some(Sessions::default()),
        })
    }

    /// Send writes without a session: a write whose outcome a failure leaves open is not
    /// retried but answers [`ClientError::Ambiguous`], and the client never adds a
    /// session's opening to the log.
    pub fn without_sessions(mut self) -> Client {
        self.sessions = None;
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

    /// The shared handle for tasks.
    pub fn shared(self) -> Arc<Client> {
        Arc::new(self)
    }
}
