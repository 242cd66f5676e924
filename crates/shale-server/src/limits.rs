//! How much a node takes on at once: connections, client calls in flight, and how long a
//! client call may last, each refused at the door, before a byte of its body is read.
//!
//! What one node can be made to hold (docs/replication.md, "Limits"):
//! - **Connections**: at most [`Limits::max_connections`]; one more is closed as soon as it
//!   is accepted. Each holds at most one HTTP/2 connection window of unread bytes (1 MiB,
//!   hyper's default) and [`Limits::max_streams_per_connection`] streams.
//! - **Client calls**: at most [`Limits::max_client_calls`] in flight over all connections;
//!   one more is answered `RESOURCE_EXHAUSTED` (marked safe to retry: nothing was read or
//!   proposed). A call holds at most one request, which the codec bounds before decoding
//!   (`crate::codec`; [`crate::network::MAX_REQUEST_BYTES`]), so decoded requests take at
//!   most `max_client_calls × MAX_REQUEST_BYTES`.
//! - **Time**: a client call that has not finished after [`Limits::client_call_ms`], its
//!   body's arrival included, is answered `DEADLINE_EXCEEDED`; a request whose body never
//!   ends holds its place that long and no longer.
//!
//! Raft RPCs and the health service are not counted against the client calls, so a client
//! flood cannot starve the replicas of their own messages once connected; a replica that
//! reconnects during a connection flood competes with the flood for a connection.
//!
//! Accept errors never end the server: tonic's accept loop stops on any error it does not
//! know as per-connection (running out of file descriptors among them), so [`Incoming`]
//! handles every error itself, pausing after those that say the process is out of
//! something.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tonic::body::BoxBody;
use tonic::metadata::MetadataValue;
use tonic::transport::server::{Connected, TcpConnectInfo};
use tonic::Status;

use crate::service::RETRY_HEADER;

/// The bounds of one node ([`crate::ServerConfig::limits`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Connections open at once, clients and peers together.
    pub max_connections: usize,
    /// HTTP/2 streams one connection may have open at once (its calls in flight).
    pub max_streams_per_connection: u32,
    /// Client calls in flight at once on this node.
    pub max_client_calls: usize,
    /// How long a client call may take, from its headers to its answer.
    pub client_call_ms: u64,
    /// The most bytes one received snapshot stream may bring ([`snapshot_budget`] also
    /// bounds it by the disk).
    pub max_snapshot_bytes: u64,
    /// The most bytes per second a snapshot is sent to one peer at (0: as fast as it
    /// goes). A replica being added or moved is caught up by a snapshot while the group
    /// takes writes; this keeps its stream from taking the disk and cores those writes
    /// need, at the cost of a longer catch-up (TiKV and CockroachDB bound it alike).
    pub snapshot_send_bytes_per_sec: u64,
}

impl Default for Limits {
    /// 1,024 connections, 64 streams each, 256 client calls in flight, 30 s per call:
    /// decoded requests stay under about 300 MiB, unread connection windows under 1 GiB.
    /// Snapshots bounded by the disk only.
    fn default() -> Self {
        Limits {
            max_connections: 1024,
            max_streams_per_connection: 64,
            max_client_calls: 256,
            client_call_ms: 30_000,
            max_snapshot_bytes: u64::MAX,
            snapshot_send_bytes_per_sec: 0,
        }
    }
}

impl Limits {
    /// What is wrong with these bounds, given the time a write may wait for its commit.
    pub fn problems(&self, request_timeout_ms: u64) -> Vec<String> {
        let mut problems = Vec::new();
        if self.max_connections == 0 {
            problems.push("max_connections must be positive".into());
        }
        if self.max_streams_per_connection == 0 {
            problems.push("max_streams_per_connection must be positive".into());
        }
        if self.max_client_calls == 0 {
            problems.push("max_client_calls must be positive".into());
        }
        if self.client_call_ms <= request_timeout_ms {
            problems.push(format!(
                "client_call_ms ({}) must exceed request_timeout_ms ({request_timeout_ms}), \
                 or a write could be cut off while it waits for its commit",
                self.client_call_ms
            ));
        }
        problems
    }
}

/// Disk space a received snapshot leaves free: the log store shares the disk, and a log
/// store that cannot write stops the node.
pub const SNAPSHOT_DISK_RESERVE_BYTES: u64 = 256 << 20;

/// The most bytes a snapshot stream arriving now may bring: `max_snapshot_bytes`, and
/// half the space free in `dir` beyond [`SNAPSHOT_DISK_RESERVE_BYTES`] (a snapshot is
/// written twice: received into a file, then into the state machine's next generation).
///
/// # Errors
/// The file system's, if the free space cannot be read.
pub fn snapshot_budget(max_snapshot_bytes: u64, dir: &std::path::Path) -> io::Result<u64> {
    let free = fs4::available_space(dir)?;
    Ok(max_snapshot_bytes.min(free.saturating_sub(SNAPSHOT_DISK_RESERVE_BYTES) / 2))
}

/// What the limits refused, for the metrics.
#[derive(Debug, Default)]
pub struct Refusals {
    /// Connections closed at once for [`Limits::max_connections`].
    pub connections: AtomicU64,
    /// Client calls answered `RESOURCE_EXHAUSTED` for [`Limits::max_client_calls`].
    pub calls: AtomicU64,
    /// Client calls cut off at [`Limits::client_call_ms`].
    pub calls_timed_out: AtomicU64,
    /// Accept errors other than a connection's own (out of file descriptors, memory).
    pub accept_errors: AtomicU64,
}

/// How long to pause after an accept error that is not a connection's own: the process is
/// out of file descriptors or memory, and accepting again at once would spin.
const ACCEPT_ERROR_PAUSE: Duration = Duration::from_millis(50);

/// The connections a node serves: accepted from its listener while fewer than
/// [`Limits::max_connections`] are open, with Nagle's algorithm off (with it, a reply
/// written in two pieces waits for the client's delayed acknowledgement, 40 ms on Linux).
pub struct Incoming {
    listener: TcpListener,
    slots: Arc<Semaphore>,
    refusals: Arc<Refusals>,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl Incoming {
    pub fn new(listener: TcpListener, limits: &Limits, refusals: Arc<Refusals>) -> Incoming {
        Incoming {
            listener,
            slots: Arc::new(Semaphore::new(limits.max_connections)),
            refusals,
            pause: None,
        }
    }
}

/// True for an accept error that concerns one connection only (it was reset before it
/// was accepted); anything else concerns the process.
fn connection_error(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::ConnectionAborted
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::Interrupted
            | io::ErrorKind::WouldBlock
    )
}

impl tokio_stream::Stream for Incoming {
    type Item = io::Result<Admitted>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        loop {
            if let Some(pause) = self.pause.as_mut() {
                std::task::ready!(pause.as_mut().poll(cx));
                self.pause = None;
            }
            match std::task::ready!(self.listener.poll_accept(cx)) {
                Ok((stream, _)) => {
                    let Ok(slot) = Arc::clone(&self.slots).try_acquire_owned() else {
                        self.refusals.connections.fetch_add(1, Ordering::Relaxed);
                        drop(stream);
                        continue;
                    };
                    // Fails only for a connection already reset; it then fails its first read.
                    let _ = stream.set_nodelay(true);
                    return Poll::Ready(Some(Ok(Admitted {
                        stream,
                        _slot: slot,
                    })));
                }
                Err(e) if connection_error(&e) => continue,
                Err(e) => {
                    if self.refusals.accept_errors.fetch_add(1, Ordering::Relaxed) == 0 {
                        tracing::warn!("accepting a connection: {e}; pausing and retrying");
                    }
                    self.pause = Some(Box::pin(tokio::time::sleep(ACCEPT_ERROR_PAUSE)));
                }
            }
        }
    }
}

/// An accepted connection, holding its place among [`Limits::max_connections`] until it
/// closes.
pub struct Admitted {
    stream: TcpStream,
    _slot: OwnedSemaphorePermit,
}

impl Connected for Admitted {
    type ConnectInfo = TcpConnectInfo;

    fn connect_info(&self) -> TcpConnectInfo {
        self.stream.connect_info()
    }
}

impl AsyncRead for Admitted {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for Admitted {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// The path prefix of the client service's methods.
const CLIENT_SERVICE: &str = "/shale.v1.Kv/";

/// The tower layer that bounds client calls ([`Limits::max_client_calls`],
/// [`Limits::client_call_ms`]); other services pass through.
#[derive(Clone, Debug)]
pub struct CallLayer {
    slots: Arc<Semaphore>,
    call_time: Duration,
    refusals: Arc<Refusals>,
}

impl CallLayer {
    pub fn new(limits: &Limits, refusals: Arc<Refusals>) -> CallLayer {
        CallLayer {
            slots: Arc::new(Semaphore::new(limits.max_client_calls)),
            call_time: Duration::from_millis(limits.client_call_ms),
            refusals,
        }
    }
}

impl<S> tower::Layer<S> for CallLayer {
    type Service = Bounded<S>;

    fn layer(&self, inner: S) -> Bounded<S> {
        Bounded {
            inner,
            layer: self.clone(),
        }
    }
}

/// A service whose client calls are bounded.
#[derive(Clone, Debug)]
pub struct Bounded<S> {
    inner: S,
    layer: CallLayer,
}

impl<S, B> tower::Service<http::Request<B>> for Bounded<S>
where
    S: tower::Service<http::Request<B>, Response = http::Response<BoxBody>>,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = http::Response<BoxBody>;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: http::Request<B>) -> Self::Future {
        if !req.uri().path().starts_with(CLIENT_SERVICE) {
            return Box::pin(self.inner.call(req));
        }
        let Ok(slot) = Arc::clone(&self.layer.slots).try_acquire_owned() else {
            self.layer.refusals.calls.fetch_add(1, Ordering::Relaxed);
            let mut status =
                Status::resource_exhausted("this node serves its most client calls at once");
            status
                .metadata_mut()
                .insert(RETRY_HEADER, MetadataValue::from_static("safe"));
            return Box::pin(std::future::ready(Ok(status.into_http())));
        };
        let call = self.inner.call(req);
        let (time, refusals) = (self.layer.call_time, Arc::clone(&self.layer.refusals));
        Box::pin(async move {
            let answer = tokio::time::timeout(time, call).await;
            drop(slot);
            match answer {
                Ok(answer) => answer,
                Err(_) => {
                    refusals.calls_timed_out.fetch_add(1, Ordering::Relaxed);
                    Ok(Status::deadline_exceeded(format!(
                        "the call took longer than this node's {} ms",
                        time.as_millis()
                    ))
                    .into_http())
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_checked() {
        assert!(Limits::default().problems(5_000).is_empty());
        let bad = Limits {
            max_connections: 0,
            max_streams_per_connection: 0,
            max_client_calls: 0,
            client_call_ms: 5_000,
            max_snapshot_bytes: 0,
            snapshot_send_bytes_per_sec: 0,
        };
        assert_eq!(bad.problems(5_000).len(), 4, "{:?}", bad.problems(5_000));
    }

    #[test]
    fn a_snapshot_may_take_half_the_free_disk_beyond_the_reserve() {
        let dir = tempfile::tempdir().expect("tempdir");
        let free = fs4::available_space(dir.path()).expect("free space");
        let budget = snapshot_budget(u64::MAX, dir.path()).expect("budget");
        // The free space moves with other writers; allow for a little.
        let want = free.saturating_sub(SNAPSHOT_DISK_RESERVE_BYTES) / 2;
        assert!(budget.abs_diff(want) < 64 << 20, "{budget} vs {want}");
        assert_eq!(snapshot_budget(1000, dir.path()).expect("budget"), 1000);
    }
}
