//! `shale-server`: one replica of a Shale cluster. A thin shell over
//! [`shale_server::Server`]: parse the flags, start, bootstrap if asked, stop on SIGINT or
//! SIGTERM.
//!
//! ```text
//! shale-server --id 1 --listen 127.0.0.1:7001 --data-dir /srv/shale/1 \
//!     --peer 2=127.0.0.1:7002 --peer 3=127.0.0.1:7003 --bootstrap
//! ```
//! Tokens come from the environment, so that they do not show in the process list:
//! `SHALE_TOKEN` (read-write clients), `SHALE_READ_ONLY_TOKEN` (read-only clients) and
//! `SHALE_PEER_TOKEN` (the replicas' Raft RPCs, without TLS); see `shale_server::access`. The log goes to stderr, filtered by `SHALE_LOG`
//! (`shale_server::logging`).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use shale_server::limits::Limits;
use shale_server::retention::Retention;
use shale_server::service::ReadConsistency;
use shale_server::{NodeId, Server, ServerConfig};

#[derive(Parser, Debug)]
#[command(
    name = "shale-server",
    about = "A replica of a Shale cluster (Raft over gRPC)"
)]
struct Args {
    /// This replica's id: unique in the cluster, never reused.
    #[arg(long)]
    id: NodeId,
    /// Address to listen on, for peers and clients. Loopback unless said otherwise.
    #[arg(long, default_value = "127.0.0.1:7001")]
    listen: SocketAddr,
    /// Directory of this replica's data (created if missing).
    #[arg(long)]
    data_dir: PathBuf,
    /// Another replica, as ID=HOST:PORT; repeat for each.
    #[arg(long = "peer", value_parser = parse_peer)]
    peers: Vec<(NodeId, String)>,
    /// Initialize a new cluster of this replica and its peers (ignored once initialized).
    #[arg(long, conflicts_with = "join")]
    bootstrap: bool,
    /// Make --data-dir (which must not hold a node) this replica of a new cluster of it
    /// and its peers, holding the backup FILE (`shale backup`), and exit. Then start it
    /// and its peers (with empty directories) without --bootstrap: they receive the
    /// backup from it.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["join", "bootstrap"])]
    restore: Option<PathBuf>,
    /// Join the running cluster that these peers belong to: added as a learner, caught up,
    /// then made a voter (ignored once initialized).
    #[arg(long)]
    join: bool,
    /// Split the key space at this key (its UTF-8 bytes); repeat for each, ascending.
    /// Each range is served by a Raft group of its own on every node, and every node of
    /// the cluster must be started with the same splits (docs/replication.md, "Shards").
    #[arg(long = "split", value_name = "KEY", conflicts_with_all = ["join", "restore"])]
    splits: Vec<String>,
    /// The address peers and clients reach this replica at, if not --listen (for a
    /// listen address of 0.0.0.0).
    #[arg(long, value_parser = parse_addr)]
    advertise: Option<String>,
    /// Build a snapshot after this many applied entries.
    #[arg(long, default_value_t = 10_000)]
    snapshot_every: u64,
    /// Log entries kept behind a snapshot, for followers that lag a little; one that lags
    /// more is sent the snapshot.
    #[arg(long, default_value_t = 1_000)]
    keep_log_entries: u64,
    /// On a leader, the most log entries kept for a member still catching up (a learner
    /// receiving a snapshot); one that needs more is sent a newer snapshot.
    #[arg(long, default_value_t = 1_000_000)]
    keep_log_for_lagging_entries: u64,
    /// The same bound in MiB of entries.
    #[arg(long, default_value_t = 1_024)]
    keep_log_for_lagging_mib: u64,
    /// Every replica embeds the texts it applies, rather than the leader once for all
    /// (docs/replication.md, "Embed once").
    #[arg(long)]
    embed_on_every_replica: bool,
    /// What get, scan and search guarantee (docs/replication.md, "Serializable reads").
    #[arg(long, value_enum, default_value_t = Reads::Linearizable)]
    read_consistency: Reads,
    /// The shortest time, in milliseconds, a follower waits to hear from its leader before
    /// it stands for election.
    #[arg(long, default_value_t = defaults().election_timeout_min_ms)]
    election_timeout_min_ms: u64,
    /// The longest such time (each node draws its own between the two, once); a follower
    /// also refuses to vote for this long after its leader's last heartbeat.
    #[arg(long, default_value_t = defaults().election_timeout_max_ms)]
    election_timeout_max_ms: u64,
    /// This node's certificate chain (PEM): serve TLS to clients and peers (with --tls-key
    /// and --tls-ca; docs/replication.md, "TLS").
    #[arg(long, requires_all = ["tls_key", "tls_ca"])]
    tls_cert: Option<PathBuf>,
    /// This node's private key (PEM).
    #[arg(long, requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// The cluster's certificate authority (PEM): peers' certificates must be its.
    #[arg(long, requires = "tls_cert")]
    tls_ca: Option<PathBuf>,
    /// Serve plaintext on an address other than loopback (without TLS, a node refuses to).
    #[arg(long, conflicts_with = "tls_cert")]
    allow_plaintext: bool,
    /// Serve metrics over HTTP at this address (`GET /metrics`, the OpenMetrics text
    /// format). Off unless given.
    #[arg(long)]
    metrics_listen: Option<SocketAddr>,
    /// Connections open at once, clients and peers together; more are closed as accepted.
    #[arg(long, default_value_t = Limits::default().max_connections)]
    max_connections: usize,
    /// Calls one connection may have in flight at once (HTTP/2 streams).
    #[arg(long, default_value_t = Limits::default().max_streams_per_connection)]
    max_streams_per_connection: u32,
    /// Client calls served at once; more answer RESOURCE_EXHAUSTED (safe to retry).
    #[arg(long, default_value_t = Limits::default().max_client_calls)]
    max_client_calls: usize,
    /// Milliseconds a write may wait for its commit, a read for the leader's confirmation.
    #[arg(long, default_value_t = 5_000)]
    request_timeout_ms: u64,
    /// Milliseconds a client call may take, its request's arrival included (more than
    /// --request-timeout-ms).
    #[arg(long, default_value_t = Limits::default().client_call_ms)]
    client_call_ms: u64,
    /// The most bytes a received snapshot may bring (besides half the free disk).
    #[arg(long)]
    max_snapshot_bytes: Option<u64>,
    /// The most MiB per second a snapshot is sent to one peer at (default: as fast as it
    /// goes); a replica caught up while writes flow then takes less from them.
    #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
    snapshot_send_mib_per_sec: Option<u64>,
    /// Threads of the async runtime that serves RPCs and drives Raft (default: one per
    /// core). Storage calls run on a separate blocking pool either way.
    #[arg(long, value_parser = clap::value_parser!(u16).range(1..))]
    worker_threads: Option<u16>,
}

/// `--read-consistency`: [`ReadConsistency`] on the command line.
#[derive(Clone, Copy, Debug, ValueEnum)]
enum Reads {
    /// The leader confirms its leadership with a quorum before each read: a read sees
    /// every write that completed before it began.
    Linearizable,
    /// Every replica answers from what it has applied, without asking the others: faster,
    /// and served in a minority, but a read may miss writes that completed before it
    /// began, even the client's own.
    Serializable,
}

impl From<Reads> for ReadConsistency {
    fn from(r: Reads) -> Self {
        match r {
            Reads::Linearizable => ReadConsistency::Linearizable,
            Reads::Serializable => ReadConsistency::Serializable,
        }
    }
}

/// The library's defaults, for the flags' defaults.
fn defaults() -> ServerConfig {
    ServerConfig::new(0, SocketAddr::from(([127, 0, 0, 1], 0)), "")
}

fn parse_peer(s: &str) -> Result<(NodeId, String), String> {
    let (id, addr) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected ID=HOST:PORT"))?;
    let id = id
        .parse::<NodeId>()
        .map_err(|e| format!("{s:?}: node id: {e}"))?;
    shale_server::network::check_peer_addr(addr)?;
    Ok((id, addr.to_string()))
}

fn parse_addr(s: &str) -> Result<String, String> {
    shale_server::network::check_peer_addr(s).map(|()| s.to_string())
}

/// The token in environment variable `name`, if set and not empty.
fn env_token(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|t| !t.is_empty())
}

/// The node: a restore when `--restore` asks for one, else the server, started,
/// bootstrapped or joined as asked, until a signal or a fatal error stops it.
async fn run(args: Args) -> shale_server::Result<()> {
    if let Some(backup) = &args.restore {
        return restore(&args, backup).await;
    }
    let server = Server::start(config(&args)).await?;
    tracing::info!("node {} listening on {}", args.id, server.addr());
    if let Some(at) = server.metrics_addr() {
        tracing::info!("metrics at http://{at}/metrics");
    }
    let advertised = args
        .advertise
        .clone()
        .unwrap_or_else(|| server.addr().to_string());
    if args.bootstrap && !server.is_initialized().await? {
        let mut members: BTreeMap<NodeId, String> = args.peers.iter().cloned().collect();
        members.insert(args.id, advertised.clone());
        server.bootstrap(members).await?;
        tracing::info!("bootstrapped a new cluster");
    }
    if args.join && !server.is_initialized().await? {
        join(&args, &advertised).await?;
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .map_err(|e| shale_server::Error::Transport(format!("signal handler: {e}")))?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
        fatal = server.fatal() => {
            // Nothing can be served any more: fail, so that a supervisor restarts the
            // node (it recovers from its data directory like after a crash).
            return Err(shale_server::Error::Raft(format!("fatal: {fatal}")));
        }
    }
    tracing::info!("stopping");
    server.shutdown().await
}

/// `--restore`: a new cluster's data directory from `backup`, this node and its peers its
/// members.
async fn restore(args: &Args, backup: &Path) -> shale_server::Result<()> {
    let mut members: BTreeMap<NodeId, String> = args.peers.iter().cloned().collect();
    let own = args
        .advertise
        .clone()
        .unwrap_or_else(|| args.listen.to_string());
    members.insert(args.id, own);
    let r = shale_server::restore::restore(&args.data_dir, args.id, members, backup).await?;
    tracing::info!(
        "restored {} pairs up to log index {} into {}: cluster {:032x}; start the nodes \
         without --bootstrap",
        r.pairs,
        r.last_log_id.index,
        args.data_dir.display(),
        r.cluster
    );
    Ok(())
}

/// The server's configuration from the command line and the tokens' environment
/// variables.
fn config(args: &Args) -> ServerConfig {
    let mut cfg = ServerConfig::new(args.id, args.listen, &args.data_dir);
    cfg.token = env_token("SHALE_TOKEN");
    cfg.read_only_token = env_token("SHALE_READ_ONLY_TOKEN");
    cfg.peer_token = env_token("SHALE_PEER_TOKEN");
    cfg.snapshot_every_entries = args.snapshot_every;
    cfg.retention = Retention {
        after_snapshot_entries: args.keep_log_entries,
        lagging_entries: args.keep_log_for_lagging_entries,
        lagging_bytes: args.keep_log_for_lagging_mib.saturating_mul(1 << 20),
    };
    cfg.embed_once = !args.embed_on_every_replica;
    cfg.read_consistency = args.read_consistency.into();
    cfg.splits = args.splits.iter().map(|k| k.as_bytes().to_vec()).collect();
    cfg.election_timeout_min_ms = args.election_timeout_min_ms;
    cfg.election_timeout_max_ms = args.election_timeout_max_ms;
    cfg.metrics_listen = args.metrics_listen;
    cfg.allow_plaintext = args.allow_plaintext;
    cfg.request_timeout_ms = args.request_timeout_ms;
    cfg.limits = Limits {
        max_connections: args.max_connections,
        max_client_calls: args.max_client_calls,
        max_streams_per_connection: args.max_streams_per_connection,
        client_call_ms: args.client_call_ms,
        max_snapshot_bytes: args.max_snapshot_bytes.unwrap_or(u64::MAX),
        snapshot_send_bytes_per_sec: args.snapshot_send_mib_per_sec.map_or(0, |m| m << 20),
    };
    if let (Some(cert), Some(key), Some(ca)) = (&args.tls_cert, &args.tls_key, &args.tls_ca) {
        cfg.tls = Some(shale_server::tls::TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            ca: ca.clone(),
        });
    }
    cfg
}

/// `--join`: ask the cluster of `--peer`s to add this node, at `advertised`, as a learner,
/// then as a voter.
async fn join(args: &Args, advertised: &str) -> shale_server::Result<()> {
    let peers: Vec<String> = args.peers.iter().map(|(_, addr)| addr.clone()).collect();
    let mut client = shale_client::Client::new(peers, env_token("SHALE_TOKEN"))
        .map_err(|e| shale_server::Error::Raft(format!("join: {e}")))?
        .with_deadline(std::time::Duration::from_secs(300));
    if let Some(ca) = &args.tls_ca {
        let pem = std::fs::read(ca).map_err(|e| {
            shale_server::Error::Config(vec![format!("--tls-ca {}: {e}", ca.display())])
        })?;
        client = client.with_tls(pem);
    }
    client
        .add_learner(args.id, advertised)
        .await
        .map_err(|e| shale_server::Error::Raft(format!("join as a learner: {e}")))?;
    let m = client
        .add_voters(&[args.id])
        .await
        .map_err(|e| shale_server::Error::Raft(format!("join as a voter: {e}")))?;
    tracing::info!("joined; voters now {:?}", m.voters);
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let directives = std::env::var("SHALE_LOG").ok().filter(|d| !d.is_empty());
    if let Err(e) = shale_server::logging::init(directives.as_deref()) {
        eprintln!("shale-server: {e}");
        return ExitCode::FAILURE;
    }
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Some(n) = args.worker_threads {
        builder.worker_threads(usize::from(n));
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e}");
            ExitCode::FAILURE
        }
    }
}
