//! What a client call can fail with.

/// What a client call can fail with.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClientError {
    /// The server refused the request before proposing it (reserved key, size limits).
    Refused(String),
    /// What the request names does not exist (a search of an index never defined).
    NotFound(String),
    /// The token is missing or wrong.
    Unauthenticated(String),
    /// The token may not do this (a read-only token on a write).
    PermissionDenied(String),
    /// No answer within the deadline; the last error seen says why.
    Timeout { last: String },
    /// A write failed in a way that leaves open whether it was applied.
    Ambiguous(String),
    /// Anything else the server answered (a bug or a damaged replica).
    Server(String),
    /// The client was built wrong (no endpoint, a bad address).
    Config(String),
    /// The write's session was closed, or its answer forgotten, before this try: nothing
    /// changed now. The client opens a new session and retries a write whose first try
    /// meets this; a later try answers [`ClientError::Ambiguous`] instead.
    SessionExpired(String),
    /// The keys of one atomic batch lie in the shards of these groups (ascending): a
    /// batch across shards is not supported, and nothing of it was applied.
    CrossShard { groups: Vec<u64> },
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ClientError::Refused(m) => write!(f, "refused: {m}"),
            ClientError::NotFound(m) => write!(f, "not found: {m}"),
            ClientError::Unauthenticated(m) => write!(f, "unauthenticated: {m}"),
            ClientError::PermissionDenied(m) => write!(f, "permission denied: {m}"),
            ClientError::Timeout { last } => {
                write!(f, "no answer within the deadline; last error: {last}")
            }
            ClientError::Ambiguous(m) => write!(f, "the outcome is unknown: {m}"),
            ClientError::Server(m) => write!(f, "server error: {m}"),
            ClientError::Config(m) => write!(f, "client configuration: {m}"),
            ClientError::SessionExpired(m) => write!(f, "session expired: {m}"),
            ClientError::CrossShard { groups } => write!(
                f,
                "the batch's keys lie in the shards of groups {groups:?}: a batch across \
                 shards is not supported, and nothing of it was applied"
            ),
        }
    }
}

impl std::error::Error for ClientError {}
