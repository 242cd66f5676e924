//! A node under a flood of bad requests keeps serving a well-behaved client, in bounded
//! memory.
//!
//! A one-voter cluster runs the binary with small limits (8 calls per connection, 64
//! client calls, 3 s per call, 48 connections). A client connects and writes; then a
//! misbehaving client, speaking raw HTTP/2:
//! - opens 4 connections and on each as many calls as it may, each declaring a 1 MB
//!   request and sending 512 KiB of it, never the rest (endless requests);
//! - on two more connections sends requests declaring 100 MiB (oversized), protobuf that
//!   does not parse (malformed), and a batch of 50,000 empty operations in 100 KB;
//! - opens connections until the node closes them (past `--max-connections`).
//!
//! Meanwhile the well-behaved client's writes and reads must all succeed, each within a
//! second; every bad request must be answered with an error; the endless ones end at the
//! call time with `DEADLINE_EXCEEDED`; the node's peak resident memory must stay under its
//! baseline plus 200 MiB. Two negative controls run the floods against looser limits and
//! must fail the checks: with 64 calls per connection, 16 endless calls on each of the 4
//! connections take all 64 and the client waits for them to time out; with no bound on
//! client calls, 256 endless calls on each hold about 512 MiB.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use h2::client::SendRequest;
use shale_client::Client;

/// The binary under test.
const SERVER: &str = env!("CARGO_BIN_EXE_shale-server");

/// A node's process, killed when dropped.
struct Node {
    child: Child,
    addr: SocketAddr,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Node {
    fn start(dir: &Path, limits: &[&str]) -> Node {
        let addr = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port");
        let child = Command::new(SERVER)
            .args(["--id", "1", "--bootstrap", "--listen", &addr.to_string()])
            .arg("--data-dir")
            .arg(dir)
            .args(limits)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start shale-server");
        Node { child, addr }
    }

    /// The process's peak resident memory so far, in bytes.
    fn peak_rss(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("read the node's /proc status");
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .expect("VmHWM in /proc status");
        kib * 1024
    }
}

/// What the flood found.
#[derive(Debug)]
struct Outcome {
    /// The well-behaved client's calls: how many failed, and the slowest.
    failed: Vec<String>,
    slowest: Duration,
    /// The node's peak resident memory before and after the flood.
    baseline_rss: u64,
    peak_rss: u64,
    /// How many bad calls were answered with each grpc-status (None: no answer in time).
    bad_answers: BTreeMap<Option<u32>, usize>,
    /// How many endless calls the flood made, and how many were answered
    /// `DEADLINE_EXCEEDED`.
    endless_calls: usize,
    endless_timed_out: usize,
    /// How many extra connections the node closed at once.
    connections_closed: usize,
}

/// A raw HTTP/2 connection to `addr`.
async fn connect(addr: SocketAddr) -> SendRequest<Bytes> {
    let tcp = tokio::net::TcpStream::connect(addr).await.expect("connect");
    let (send, conn) = h2::client::handshake(tcp).await.expect("HTTP/2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    send
}

/// The headers of a gRPC call to the client service's `method`.
fn call(method: &str) -> http::Request<()> {
    http::Request::builder()
        .method("POST")
        .uri(format!("http://shale/shale.v1.Kv/{method}"))
        .header("content-type", "application/grpc")
        .header("te", "trailers")
        .body(())
        .expect("a request")
}

/// A gRPC message prefix declaring `len` bytes, then `body`.
fn framed(len: u32, body: &[u8]) -> Bytes {
    let mut out = vec![0u8];
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(body);
    Bytes::from(out)
}

/// The grpc-status of a response (from its headers, or its trailers).
async fn grpc_status(resp: h2::client::ResponseFuture) -> Option<u32> {
    let resp = resp.await.ok()?;
    let parse =
        |h: &http::HeaderMap| -> Option<u32> { h.get("grpc-status")?.to_str().ok()?.parse().ok() };
    if let Some(code) = parse(resp.headers()) {
        return Some(code);
    }
    let mut body = resp.into_body();
    while let Some(chunk) = body.data().await {
        let chunk = chunk.ok()?;
        let _ = body.flow_control().release_capacity(chunk.len());
    }
    parse(&body.trailers().await.ok()??)
}

/// The 512 KiB an endless call sends of the 1 MB it declares (shared by every call).
fn endless_part() -> Bytes {
    framed(1_000_000, &vec![0x0a; 512 * 1024])
}

/// An endless call on `conn`: its answer, and its stream, kept open.
async fn endless(
    conn: &SendRequest<Bytes>,
    part: &Bytes,
) -> Option<(h2::client::ResponseFuture, h2::SendStream<Bytes>)> {
    let mut ready = conn.clone().ready().await.ok()?;
    let (resp, mut stream) = ready.send_request(call("Put"), false).ok()?;
    stream.send_data(part.clone(), false).ok()?;
    Some((resp, stream))
}

/// A whole call of `body` (its prefix declaring `declared` bytes) to `method`: the
/// grpc-status it is answered with, if within 5 s.
async fn bad(conn: &SendRequest<Bytes>, method: &str, declared: u32, body: &[u8]) -> Option<u32> {
    let mut ready = conn.clone().ready().await.ok()?;
    let (resp, mut stream) = ready.send_request(call(method), false).ok()?;
    stream.send_data(framed(declared, body), true).ok()?;
    tokio::time::timeout(Duration::from_secs(5), grpc_status(resp))
        .await
        .ok()?
}

/// A batch of `n` empty operations, encoded by hand: field 1 (ops), each of length 0.
fn empty_ops(n: usize) -> Vec<u8> {
    [0x0a, 0x00].repeat(n)
}

/// True if the node closed `conn` at once (it sends nothing before the client's preface).
fn closed_at_once(conn: &TcpStream) -> bool {
    conn.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("read timeout");
    let mut byte = [0u8; 1];
    match std::io::Read::read(&mut &*conn, &mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// Run the flood against a node started with `limits`, with `endless_per_connection`
/// endless calls on each of 4 connections.
async fn flood(limits: &[&str], endless_per_connection: usize) -> Outcome {
    let dir = tempfile::tempdir().expect("tempdir");
    let node = Node::start(dir.path(), limits);
    let client = Client::new(vec![node.addr.to_string()], None)
        .expect("client")
        .with_deadline(Duration::from_secs(5));
    let start = Instant::now();
    while client.put(b"warm", b"up").await.is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the node never served"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let baseline_rss = node.peak_rss();

    // Endless calls. A connection's calls past its streams wait in the client (HTTP/2
    // says how many a connection may have open); only the open ones reach the node.
    let part = endless_part();
    let mut conns = Vec::new();
    let mut held = Vec::new();
    for _ in 0..4 {
        let conn = connect(node.addr).await;
        for _ in 0..endless_per_connection {
            held.extend(endless(&conn, &part).await);
        }
        conns.push(conn);
    }
    // A call is sent before the node takes it in: give the node time to admit the endless
    // calls it will admit, or the client's first call can take a slot one of them was
    // meant to hold (the negative control then finds the client served at once).
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Oversized, malformed and many-field calls.
    let junk = [connect(node.addr).await, connect(node.addr).await];
    let mut bad_answers = BTreeMap::new();
    for conn in junk.iter().cycle().take(30) {
        for answer in [
            bad(conn, "Put", 100 << 20, b"").await,
            bad(conn, "Get", 64, &[0xff; 64]).await,
            bad(conn, "Batch", 100_000, &empty_ops(50_000)).await,
        ] {
            *bad_answers.entry(answer).or_insert(0) += 1;
        }
    }
    // Connections past the limit.
    let mut extra = Vec::new();
    let mut connections_closed = 0;
    for _ in 0..80 {
        if let Ok(conn) = TcpStream::connect(node.addr) {
            connections_closed += usize::from(closed_at_once(&conn));
            extra.push(conn);
        }
    }

    // The well-behaved client, while all of that is held.
    let mut failed = Vec::new();
    let mut slowest = Duration::ZERO;
    for i in 0..40u32 {
        let key = format!("key{i}").into_bytes();
        let t = Instant::now();
        if let Err(e) = client.put(&key, b"v").await {
            failed.push(format!("put: {e}"));
        }
        match client.get(&key).await {
            Ok(Some(_)) => {}
            other => failed.push(format!("get: {other:?}")),
        }
        slowest = slowest.max(t.elapsed());
        tokio::time::sleep(Duration::from_millis(25)).await;
    }

    let endless_calls = held.len();
    let answered_by = Instant::now() + Duration::from_secs(6);
    let mut endless_timed_out = 0;
    for (resp, _stream) in held {
        let answer = tokio::time::timeout_at(answered_by.into(), grpc_status(resp)).await;
        endless_timed_out += usize::from(answer == Ok(Some(DEADLINE_EXCEEDED)));
    }
    let peak_rss = node.peak_rss();
    drop((extra, conns, junk));
    Outcome {
        failed,
        slowest,
        baseline_rss,
        peak_rss,
        bad_answers,
        endless_calls,
        endless_timed_out,
        connections_closed,
    }
}

/// gRPC's code for `DEADLINE_EXCEEDED`.
const DEADLINE_EXCEEDED: u32 = 4;

/// The limits every run shares: 3 s per call (2 s for a commit), 48 connections.
const COMMON: [&str; 6] = [
    "--request-timeout-ms",
    "2000",
    "--client-call-ms",
    "3000",
    "--max-connections",
    "48",
];

/// The floods run one at a time: each measures a process's memory and a client's latency.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const ONE_SECOND: Duration = Duration::from_secs(1);
const MEMORY_ALLOWED: u64 = 200 << 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_is_refused_at_the_door_and_the_client_served() {
    let _serial = SERIAL.lock().await;
    let limits = [
        &COMMON[..],
        &[
            "--max-streams-per-connection",
            "8",
            "--max-client-calls",
            "64",
        ],
    ]
    .concat();
    let out = flood(&limits, 8).await;
    println!("{out:?}");
    assert!(out.failed.is_empty(), "{out:?}");
    assert!(out.slowest < ONE_SECOND, "{out:?}");
    assert!(out.peak_rss < out.baseline_rss + MEMORY_ALLOWED, "{out:?}");
    assert!(
        out.bad_answers
            .keys()
            .all(|answer| answer.is_some_and(|code| code != 0)),
        "every bad call is answered with an error: {out:?}"
    );
    assert_eq!(out.endless_calls, 4 * 8, "{out:?}");
    // All of them, at the node's call time.
    assert_eq!(out.endless_timed_out, out.endless_calls, "{out:?}");
    // 48 connections: the client's, 4 + 2 of the flood, so 41 of the 80 extra.
    assert!(out.connections_closed >= 80 - 41, "{out:?}");
}

/// Negative control: with as many calls per connection as the node serves in all, four
/// connections take every call and the client waits until the endless calls time out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_control_calls_per_connection_too_many() {
    let _serial = SERIAL.lock().await;
    let limits = [
        &COMMON[..],
        &[
            "--max-streams-per-connection",
            "64",
            "--max-client-calls",
            "64",
        ],
    ]
    .concat();
    let out = flood(&limits, 16).await;
    println!("{out:?}");
    assert!(
        out.slowest >= ONE_SECOND,
        "the latency check can fail: {out:?}"
    );
}

/// Negative control: with no bound on client calls, the endless calls hold their bytes
/// (4 × 256 × 512 KiB).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn negative_control_no_call_limit() {
    let _serial = SERIAL.lock().await;
    let limits = [
        &COMMON[..],
        &[
            "--max-streams-per-connection",
            "256",
            "--max-client-calls",
            "1000000",
        ],
    ]
    .concat();
    let out = flood(&limits, 256).await;
    println!("{out:?}");
    assert!(
        out.peak_rss >= out.baseline_rss + MEMORY_ALLOWED,
        "the memory check can fail: {out:?}"
    );
}
