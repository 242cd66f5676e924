//! The command line of `shale-chaos`.

use std::path::PathBuf;

use clap::Parser;

#[derive(Parser, Debug, Clone)]
#[command(
    name = "shale-chaos",
    about = "Record a history of a Shale cluster under faults"
)]
pub(crate) struct Args {
    /// The shale-server binary to run.
    #[arg(long)]
    pub(crate) server_bin: PathBuf,
    /// Working directory: the nodes' data and logs (created; must be empty or absent).
    #[arg(long)]
    pub(crate) dir: PathBuf,
    /// Where to write the history (JSON lines).
    #[arg(long)]
    pub(crate) history: PathBuf,
    /// How long the clients run.
    #[arg(long, default_value_t = 60)]
    pub(crate) seconds: u64,
    #[arg(long, default_value_t = 8)]
    pub(crate) clients: u32,
    /// Keys k0, k1, ...: in pairs, each pair the keys of one batch or scan.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=10))]
    pub(crate) keys: u32,
    #[arg(long, default_value_t = 1)]
    pub(crate) seed: u64,
    /// Run each server in a network namespace of its own and add partitions to the faults
    /// (needs root and ip(8)).
    #[arg(long)]
    pub(crate) netns: bool,
    /// Split the key space at this key (repeat for each, ascending): every server is
    /// started with `--split KEY`, each range a Raft group of its own, and the replicas of
    /// every group must agree at the end. Split between pairs (`k2`) so that no batch or
    /// scan crosses shards.
    #[arg(long = "split", value_name = "KEY")]
    pub(crate) splits: Vec<String>,
    /// One more flag for every server, after the run's own (`--server-arg=--flag=value`);
    /// repeat for each. The negative controls of `scripts/chaos.sh` choose their wrong
    /// settings so.
    #[arg(long = "server-arg", value_name = "ARG", allow_hyphen_values = true)]
    pub(crate) server_args: Vec<String>,
}
