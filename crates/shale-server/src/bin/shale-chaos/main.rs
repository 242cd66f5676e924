//! `shale-chaos`: three `shale-server` processes on 127.0.0.1, clients doing get, put,
//! delete, compare-and-set, batches and scans on a few keys (`workload.rs`) while the
//! leader is killed and restarted, a replica is removed from the cluster and added back,
//! nodes are paused and resumed and the whole cluster is killed and restarted; every call is
//! recorded with its start and end time, one JSON object a line, for the porcupine checker
//! in `chaos/` (run by `scripts/chaos.sh`).
//!
//! Reads go to a node picked at random (a follower redirects them), so servers started
//! with `--server-arg=--read-consistency=serializable`, which answer reads from their own
//! state without the read index, produce stale reads the checker must catch.
//!
//! After each fault heals, every node must name one leader, in one term, within
//! [`leader::LEADER_BOUND`]: a cluster that never elects again fails the run (servers given
//! election timeouts longer than the bound must fail it; `scripts/chaos.sh` checks).
//!
//! After the run, once the three replicas report the same applied index, they are stopped
//! and each one's state machine is opened from its directory and hashed: the hashes and
//! applied indexes must agree.
//!
//! With `--netns` (root, ip(8); `netns.rs`) each server runs in a network namespace of its
//! own, joined to the others by a veth pair and a bridge (10.77.0.0/24) that the run
//! creates and removes, and the faults add partitions: a node's link is cut for 2 s, isolating it
//! (the leader half the time) from the other two and from the clients, or one direction
//! of it is (what the node sends, or what it receives).
//!
//! The servers snapshot every 100 entries and keep 10 behind, so a node that was down,
//! paused or cut off long enough is caught up by a snapshot; a removed replica is added
//! back only once the leader's log no longer holds what it lacks, so it always is. A run
//! in which no replica installed a snapshot fails, and so does a run in which no replica
//! was removed and added back.
//!
//! The rooms: `args.rs` the command line, `cluster.rs` the server processes, `leader.rs`
//! the wait for one leader, `faults.rs` and `membership.rs` the faults, `workload.rs` the
//! clients and their history, `replicas.rs` the check that the replicas agree,
//! `report.rs` the summary, `netns.rs` the namespace network.

use std::fs::File;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use shale_client::Client;

mod args;
mod cluster;
mod faults;
mod leader;
mod membership;
mod netns;
mod replicas;
mod report;
mod workload;
use args::Args;
use cluster::start_cluster;
use faults::faults;
use netns::{netns_down, netns_up};
use replicas::{compare_replicas, stop_cluster};
use report::report;
use workload::{client_loop, History};

/// The run: start the cluster, run the clients while the faults hit it, then stop it and
/// check that the replicas agree.
async fn run(args: Args) -> Result<(), String> {
    std::fs::create_dir_all(&args.dir).map_err(|e| format!("{}: {e}", args.dir.display()))?;
    if args.netns {
        netns_up()?;
    }
    let mut cluster = start_cluster(&args)?;
    let endpoints = cluster.endpoints();
    let history_file =
        File::create(&args.history).map_err(|e| format!("{}: {e}", args.history.display()))?;
    let history = Arc::new(History::new(history_file));
    // The cluster elects a leader before the clock starts.
    let warmup = Client::new(endpoints.clone(), None)
        .map_err(|e| e.to_string())?
        .with_deadline(Duration::from_secs(20));
    warmup
        .put(b"warmup", b"1")
        .await
        .map_err(|e| format!("no leader: {e}"))?;

    let end = Instant::now() + Duration::from_secs(args.seconds);
    let mut tasks = Vec::new();
    for id in 0..args.clients {
        tasks.push(tokio::spawn(client_loop(
            id,
            args.seed,
            args.keys,
            endpoints.clone(),
            Arc::clone(&history),
            end,
        )));
    }
    let rounds = faults(&mut cluster, end, args.seed).await;
    for t in tasks {
        let _ = t.await;
    }
    let rounds = rounds?;
    if rounds.membership_changes == 0 {
        return Err("no replica was removed and added back: the run was too short".into());
    }
    let applied = stop_cluster(&mut cluster).await?;
    compare_replicas(&cluster, &applied)?;
    history.flush().map_err(|e| format!("history: {e}"))?;
    report(rounds, &args.history);
    Ok(())
}

fn main() -> ExitCode {
    let args = Args::parse();
    if !Path::new(&args.server_bin).exists() {
        eprintln!(
            "shale-chaos: no server binary at {}",
            args.server_bin.display()
        );
        return ExitCode::FAILURE;
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("shale-chaos: runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let netns = args.netns;
    let result = runtime.block_on(run(args));
    if netns {
        netns_down();
    }
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("shale-chaos: {e}");
            ExitCode::FAILURE
        }
    }
}
