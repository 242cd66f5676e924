//! The command line of `shale-bench cluster`. Parsed once on the main thread, then read
//! (never changed) by every step of the run.

use std::path::PathBuf;

use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct ClusterArgs {
    /// The `shale-server` binary each replica runs.
    #[arg(long)]
    pub server_bin: PathBuf,
    /// Working directory (created).
    #[arg(long)]
    pub dir: PathBuf,
    /// Seconds per throughput measurement.
    #[arg(long, default_value_t = 5)]
    pub seconds: u64,
    /// Leader kills for the re-election figure.
    #[arg(long, default_value_t = 10)]
    pub kills: u32,
    /// The replicas build a snapshot after this many applied entries (and keep 1,000
    /// entries behind it), so that the replica added at the end catches up by snapshot.
    #[arg(long, default_value_t = 2_000)]
    pub snapshot_every: u64,
    /// Passed to each replica as `--worker-threads` (default: the server's own).
    #[arg(long)]
    pub server_worker_threads: Option<u16>,
    /// Run the cluster over TLS with the files `scripts/make-certs.sh DIR 4` makes
    /// (`ca.pem`, `node-<id>.pem`, `node-<id>.key`); the client trusts `ca.pem`.
    #[arg(long)]
    pub tls_dir: Option<PathBuf>,
    /// Measure only text ingest under an all-MiniLM-L6-v2 index, with this many texts:
    /// single-node Shale, then the cluster, until every replica has indexed them all
    /// (feature `semantic`).
    #[arg(long, default_value_t = 0)]
    pub embedding_texts: u32,
    /// Clients writing texts at once in the embedding figure, each a batch at a time.
    #[arg(long, default_value_t = 16)]
    pub text_clients: u32,
    /// Pass `--embed-on-every-replica` to the replicas (the figure without embed once).
    #[arg(long)]
    pub embed_on_every_replica: bool,
    /// Measure only synced writes of 64 clients over a key space split into each of these
    /// numbers of shards (`--shards 1,2,4`), a fresh cluster each.
    #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=64))]
    pub shards: Vec<u32>,
    /// Passed to each replica as `--snapshot-send-mib-per-sec` (default: unbounded).
    #[arg(long)]
    pub snapshot_send_mib_per_sec: Option<u64>,
    /// Measure only a shard's replica moving to a new node while clients write, the
    /// shard first loaded with this many MiB (`--move-mib 1024`).
    #[arg(long, default_value_t = 0)]
    pub move_mib: u64,
    /// Measure only a shard splitting in two while clients write, the shard first loaded
    /// with this many MiB (`--split-mib 1024`).
    #[arg(long, default_value_t = 0)]
    pub split_mib: u64,
    /// The keys the replicas split their key space at (`--split`), set by the shards
    /// figure for each of its clusters.
    #[arg(skip)]
    pub splits: Vec<String>,
}
