//! `shale-bench cluster`: rough figures of a 3-replica cluster on this machine, beside
//! single-node Shale with sync writes from the same run: replicated writes with 1 and 64
//! clients, batches of 100 keys, p50/p99 latency, the time from a leader's SIGKILL to the
//! next acknowledged write, and a new replica's catch-up by snapshot. Prints a Markdown
//! table on stdout.
//!
//! All replicas share this machine's cores and disk: the figures are for comparing runs
//! here, not a capacity plan. `--tls-dir` runs the same over TLS. `--embedding-texts N`
//! measures text ingest under an all-MiniLM-L6-v2 index instead (feature `semantic`);
//! `--shards 1,2,4` synced writes over a key space split into that many shards;
//! `--move-mib N` a shard of N MiB moved to a new node while clients write;
//! `--split-mib N` a shard of N MiB split in two while clients write.
//!
//! Files: [`args`] the command line, [`replica`] the server processes and the client,
//! [`measure`] the timing loop and the table's rows, [`writes`] the write rates,
//! [`failover`] re-election and catch-up, [`shards`] writes over shards, [`moving`] a
//! shard's replica moved, [`splitting`] a shard split, `embedding` the
//! text ingest. One async runtime,
//! built here, runs the whole figure on the calling thread's behalf.

mod args;
#[cfg(feature = "semantic")]
mod embedding;
mod failover;
mod measure;
mod moving;
mod replica;
mod shards;
mod splitting;
mod writes;

use std::time::Duration;

pub use args::ClusterArgs;

use crate::engine::BenchResult;

/// Run the figures `args` asks for and print their table.
///
/// # Errors
/// The working directory, a replica that does not start, a cluster with no leader, or
/// `--embedding-texts` without the `semantic` feature.
pub fn run(args: &ClusterArgs) -> BenchResult<()> {
    if args.embedding_texts > 0 && !cfg!(feature = "semantic") {
        return Err(
            "--embedding-texts needs the MiniLM model: build shale-bench with \
                    --features semantic"
                .into(),
        );
    }
    std::fs::create_dir_all(&args.dir)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let lines = runtime.block_on(figures(args))?;
    for l in lines {
        println!("{l}");
    }
    Ok(())
}

/// The table: the embedding figure if asked for, else the write rates, re-election
/// times and a replica's catch-up.
async fn figures(args: &ClusterArgs) -> Result<Vec<String>, String> {
    #[cfg(feature = "semantic")]
    if args.embedding_texts > 0 {
        return embedding::rows(args).await;
    }
    if !args.shards.is_empty() {
        return shards::rows(args).await;
    }
    if args.split_mib > 0 {
        return splitting::rows(args).await;
    }
    if args.move_mib > 0 {
        return moving::rows(args).await;
    }
    let mut out = vec![
        "| measurement | rate | p50 µs | p99 µs |".to_string(),
        "|---|---|---|---|".to_string(),
    ];
    let value = vec![b'v'; 100];
    out.extend(writes::single_node(&args.dir.join("single"), args.seconds, &value).await?);
    let (mut nodes, client) = replica::start_cluster(args, Duration::from_secs(20)).await?;
    out.extend(writes::replicated(&client, args.seconds, &value).await);
    let recovery = match failover::reelection(args, &mut nodes, &client).await {
        Ok(row) => {
            out.push(row);
            failover::catch_up(args, &mut nodes, &client).await
        }
        Err(e) => Err(e),
    };
    replica::stop_cluster(&mut nodes);
    out.push(recovery?);
    Ok(out)
}
