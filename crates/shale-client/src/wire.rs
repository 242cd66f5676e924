//! What client and server agree on beside the messages: the metadata entries, the size
//! limits, and how a connection to a node is made.

use std::time::Duration;

use tonic::transport::{Certificate, ClientTlsConfig, Endpoint};

/// The metadata entry that carries a token (`Bearer <token>`).
pub const TOKEN_HEADER: &str = "authorization";
/// Metadata entry naming the leader's address on a `FAILED_PRECONDITION`.
pub const LEADER_HEADER: &str = "shale-leader";
/// Metadata entry marking an error after which nothing was proposed.
pub const RETRY_HEADER: &str = "shale-retry";
/// Metadata entry marking a write whose session is closed or whose answer is forgotten.
pub const SESSION_HEADER: &str = "shale-session";
/// The metadata entry that names the Raft group a request is for (decimal), on a client's
/// request as on a peer's. Absent: group 1, the only group of a key space not split.
pub const GROUP_HEADER: &str = "shale-group";
/// Metadata entry marking a request whose key is outside its group's shard, or whose group
/// the node holds no replica of: nothing was applied or read, and the request goes again
/// to the group the current shard map names.
pub const SHARD_HEADER: &str = "shale-shard";

/// The most pairs one scan call returns.
pub const MAX_SCAN_PAIRS: u32 = 10_000;
/// A scan page is closed once its keys and values pass this many bytes (the first pair
/// always goes in): a page stays far below the message limit.
pub const MAX_SCAN_BYTES: usize = 16 * 1024 * 1024;

/// Most operations in one replicated write: a log entry stays far below the engine's
/// batch limit, and one proposal cannot hold the log for long.
pub const MAX_OPS_PER_COMMAND: usize = 10_000;

/// Most bytes of keys and values in one write, far below the engine's own limits. A log
/// entry travels whole in one `AppendEntries`, and openraft 0.9 gives an append one
/// heartbeat interval (100 ms by default) to be sent, written and fsynced on the follower
/// before it counts the follower unreachable and retries the same append: an entry too
/// large for that would stall replication for good.
pub const MAX_COMMAND_BYTES: usize = 1024 * 1024;

/// The largest request the client service accepts: a command of [`MAX_COMMAND_BYTES`]
/// with its encoding's overhead (at most 16 bytes for each of [`MAX_OPS_PER_COMMAND`]
/// operations) and 64 KiB to spare. tonic refuses a longer one (`OUT_OF_RANGE`) from its
/// length prefix, before reading it.
pub const MAX_REQUEST_BYTES: usize = MAX_COMMAND_BYTES + 16 * MAX_OPS_PER_COMMAND + 64 * 1024;

/// The largest gRPC message a node or a client sends or accepts (tonic's default is
/// 4 MiB): a command of [`MAX_COMMAND_BYTES`] with room to spare.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;

/// How a node at `addr` (`host:port`) is reached: over TLS with `tls`, else plaintext;
/// HTTP/2 keep-alives every second, so a dead peer is noticed within a few.
///
/// # Errors
/// A bad address or TLS configuration, as text.
pub fn endpoint(addr: &str, tls: Option<&ClientTlsConfig>) -> Result<Endpoint, String> {
    let scheme = if tls.is_some() { "https" } else { "http" };
    let e = Endpoint::from_shared(format!("{scheme}://{addr}"))
        .map_err(|e| format!("address {addr:?}: {e}"))?
        .connect_timeout(Duration::from_millis(500))
        .http2_keep_alive_interval(Duration::from_secs(1))
        .keep_alive_timeout(Duration::from_secs(3))
        .keep_alive_while_idle(true);
    match tls {
        Some(tls) => e
            .tls_config(tls.clone())
            .map_err(|e| format!("TLS for {addr:?}: {e}")),
        None => Ok(e),
    }
}

/// `msg` as a request carrying `token`, if any.
pub fn with_token<T>(msg: T, token: Option<&str>) -> tonic::Request<T> {
    let mut req = tonic::Request::new(msg);
    if let Some(t) = token {
        // A token that is not printable ASCII cannot be a metadata value; the node
        // answers the request without one UNAUTHENTICATED.
        if let Ok(v) = format!("Bearer {t}").parse() {
            req.metadata_mut().insert(TOKEN_HEADER, v);
        }
    }
    req
}

/// TLS for a client that trusts the cluster's certificate authority `ca_pem` (PEM) and
/// checks each node's certificate against the host it reaches the node at.
pub fn tls(ca_pem: impl AsRef<[u8]>) -> ClientTlsConfig {
    ClientTlsConfig::new().ca_certificate(Certificate::from_pem(ca_pem))
}
