//! `shale-figures`: rough figures of a 3-replica cluster on this machine, beside
//! single-node Shale with sync writes from the same run:
//! replicated writes with 1 and 64 clients, batches of 100 keys, p50/p99 latency, and the
//! time from a leader's SIGKILL to the next acknowledged write. Prints a Markdown table.
//!
//! All replicas share this machine's cores and disk: the figures are for comparing runs
//! here, not a capacity plan. `--tls-dir` runs the same over TLS. `--embedding-texts N`
//! measures text ingest under an all-MiniLM-L6-v2 index instead: N texts into single-node
//! Shale, then into the cluster (docs/replication.md, "Embed once").

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::Parser;
use shale_client::Client;

#[derive(Parser, Debug)]
#[command(
    name = "shale-figures",
    about = "Rough figures of a 3-replica Shale cluster"
)]
struct Args {
    #[arg(long)]
    server_bin: PathBuf,
    /// Working directory (created).
    #[arg(long)]
    dir: PathBuf,
    /// Seconds per throughput measurement.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Leader kills for the re-election figure.
    #[arg(long, default_value_t = 10)]
    kills: u32,
    /// The replicas build a snapshot after this many applied entries (and keep 1,000
    /// entries behind it), so that the replica added at the end catches up by snapshot.
    #[arg(long, default_value_t = 2_000)]
    snapshot_every: u64,
    /// Passed to each replica as `--worker-threads` (default: the server's own).
    #[arg(long)]
    server_worker_threads: Option<u16>,
    /// Run the cluster over TLS with the files `scripts/make-certs.sh DIR 4` makes
    /// (`ca.pem`, `node-<id>.pem`, `node-<id>.key`); the client trusts `ca.pem`.
    #[arg(long)]
    tls_dir: Option<PathBuf>,
    /// Measure only text ingest under an all-MiniLM-L6-v2 index, with this many texts:
    /// single-node Shale, then the cluster, until every replica has indexed them all.
    #[arg(long, default_value_t = 0)]
    embedding_texts: u32,
    /// Clients writing texts at once in the embedding figure, each a batch at a time.
    #[arg(long, default_value_t = 16)]
    text_clients: u32,
    /// Pass `--embed-on-every-replica` to the replicas (the figure without embed once).
    #[arg(long)]
    embed_on_every_replica: bool,
}

struct Node {
    id: u64,
    addr: String,
    child: Option<Child>,
}

fn start(args: &Args, nodes: &mut [Node], i: usize, bootstrap: bool) -> std::io::Result<()> {
    let peers: Vec<String> = nodes
        .iter()
        .enumerate()
        .filter(|(j, _)| *j != i)
        .map(|(_, n)| format!("{}={}", n.id, n.addr))
        .collect();
    let Some(node) = nodes.get_mut(i) else {
        return Ok(());
    };
    let mut cmd = Command::new(&args.server_bin);
    cmd.arg("--id")
        .arg(node.id.to_string())
        .arg("--listen")
        .arg(&node.addr)
        .arg("--data-dir")
        .arg(args.dir.join(format!("node-{}", node.id)));
    for p in peers {
        cmd.arg("--peer").arg(p);
    }
    cmd.arg("--snapshot-every")
        .arg(args.snapshot_every.to_string());
    if let Some(n) = args.server_worker_threads {
        cmd.arg("--worker-threads").arg(n.to_string());
    }
    if let Some(dir) = &args.tls_dir {
        cmd.arg("--tls-cert")
            .arg(dir.join(format!("node-{}.pem", node.id)))
            .arg("--tls-key")
            .arg(dir.join(format!("node-{}.key", node.id)))
            .arg("--tls-ca")
            .arg(dir.join("ca.pem"));
    }
    if args.embed_on_every_replica {
        cmd.arg("--embed-on-every-replica");
    }
    if bootstrap {
        cmd.arg("--bootstrap");
    } else if node.id > 3 {
        cmd.arg("--join");
    }
    node.child = Some(
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?,
    );
    Ok(())
}

fn percentile(sorted_us: &[u64], p: f64) -> u64 {
    if sorted_us.is_empty() {
        return 0;
    }
    let rank = ((sorted_us.len() - 1) as f64 * p).round() as usize;
    sorted_us.get(rank).copied().unwrap_or(0)
}

/// `clients` tasks each running `op` until `seconds` pass: ops/s and latencies (µs).
async fn drive<F, Fut>(clients: usize, seconds: u64, op: F) -> (f64, Vec<u64>)
where
    F: Fn(usize, u64) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = bool> + Send,
{
    let op = Arc::new(op);
    let start = Instant::now();
    let end = start + Duration::from_secs(seconds);
    let mut tasks = Vec::new();
    for c in 0..clients {
        let op = Arc::clone(&op);
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let mut n = 0u64;
            while Instant::now() < end {
                let t = Instant::now();
                if op(c, n).await {
                    lat.push(u64::try_from(t.elapsed().as_micros()).unwrap_or(u64::MAX));
                }
                n += 1;
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        if let Ok(lat) = t.await {
            all.extend(lat);
        }
    }
    let secs = start.elapsed().as_secs_f64();
    all.sort_unstable();
    (all.len() as f64 / secs, all)
}

fn row(out: &mut Vec<String>, what: &str, rate: f64, unit: &str, lat: &[u64]) {
    out.push(format!(
        "| {what} | {rate:.0} {unit} | {} | {} |",
        percentile(lat, 0.5),
        percentile(lat, 0.99)
    ));
}

/// The figures: single-node and replicated write rates, re-election times, and a
/// replica's catch-up; each a row of the table (or its own lines, for the embedding runs).
async fn run(args: Args) -> Result<Vec<String>, String> {
    std::fs::create_dir_all(&args.dir).map_err(|e| e.to_string())?;
    if args.embedding_texts > 0 {
        return embedding(&args).await;
    }
    let mut out = vec![
        "| measurement | rate | p50 µs | p99 µs |".to_string(),
        "|---|---|---|---|".to_string(),
    ];
    let value = vec![b'v'; 100];
    single_node_writes(&args, &value, &mut out).await?;
    let (mut nodes, client) = start_cluster(&args, Duration::from_secs(20)).await?;
    replicated_writes(&args, &client, &value, &mut out).await;
    out.push(reelection(&args, &mut nodes, &client).await?);
    let caught_up = catch_up(&args, &mut nodes, &client).await;
    stop_cluster(&mut nodes);
    out.push(caught_up?);
    Ok(out)
}

/// Single-node Shale, sync writes, same machine, same run: a row for 1 and 64 clients.
async fn single_node_writes(
    args: &Args,
    value: &[u8],
    out: &mut Vec<String>,
) -> Result<(), String> {
    let single = Arc::new(
        shale::Db::open(args.dir.join("single"), shale::Options::default())
            .map_err(|e| e.to_string())?,
    );
    for clients in [1usize, 64] {
        let db = Arc::clone(&single);
        let v = value.to_vec();
        let (rate, lat) = drive(clients, args.seconds, move |c, n| {
            let db = Arc::clone(&db);
            let v = v.clone();
            async move {
                tokio::task::spawn_blocking(move || {
                    let mut b = shale::WriteBatch::new();
                    b.put(format!("c{c}-{n}"), &v);
                    db.write(b, shale::WriteOptions::sync()).is_ok()
                })
                .await
                .unwrap_or(false)
            }
        })
        .await;
        row(
            out,
            &format!("single-node Shale, sync puts, {clients} client(s)"),
            rate,
            "writes/s",
            &lat,
        );
    }
    single.close().map_err(|e| e.to_string())?;

    Ok(())
}

/// Replicated puts (1 and 64 clients) and batches of 100 keys (8 clients): a row each.
async fn replicated_writes(args: &Args, client: &Arc<Client>, value: &[u8], out: &mut Vec<String>) {
    for clients in [1usize, 64] {
        let c = Arc::clone(client);
        let v = value.to_vec();
        let (rate, lat) = drive(clients, args.seconds, move |id, n| {
            let c = Arc::clone(&c);
            let v = v.clone();
            async move { c.put(format!("c{id}-{n}").as_bytes(), &v).await.is_ok() }
        })
        .await;
        row(
            out,
            &format!("replicated puts, {clients} client(s)"),
            rate,
            "writes/s",
            &lat,
        );
    }
    {
        let c = Arc::clone(client);
        let v = value.to_vec();
        let (rate, lat) = drive(8, args.seconds, move |id, n| {
            let c = Arc::clone(&c);
            let v = v.clone();
            async move {
                let ops: Vec<(Vec<u8>, Option<Vec<u8>>)> = (0..100)
                    .map(|k| (format!("b{id}-{n}-{k}").into_bytes(), Some(v.clone())))
                    .collect();
                c.batch(&ops).await.is_ok()
            }
        })
        .await;
        row(
            out,
            "replicated batches of 100 keys, 8 clients",
            rate * 100.0,
            "keys/s",
            &lat,
        );
    }
}

/// Re-election: SIGKILL the leader, time until a write is acknowledged; the table's row.
/// Every kill counts: a write that fails (ambiguous, as one sent to the dying leader is) is
/// sent again until one is acknowledged, and a kill with no write acknowledged within
/// `REELECTION_LIMIT`, or with no leader to kill, is reported beside the median.
async fn reelection(args: &Args, nodes: &mut [Node], client: &Client) -> Result<String, String> {
    const REELECTION_LIMIT: Duration = Duration::from_secs(30);
    let mut times_ms = Vec::new();
    let (mut no_leader, mut no_write) = (0u32, 0u32);
    for k in 0..args.kills {
        let Some(i) = wait_for_leader(client, nodes).await else {
            no_leader += 1;
            continue;
        };
        if let Some(child) = nodes.get_mut(i).and_then(|n| n.child.as_mut()) {
            let _ = child.kill();
            let _ = child.wait();
        }
        let t = Instant::now();
        let key = format!("after-kill-{k}");
        let acknowledged = loop {
            if client.put(key.as_bytes(), b"1").await.is_ok() {
                break true;
            }
            if t.elapsed() >= REELECTION_LIMIT {
                break false;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        };
        if acknowledged {
            times_ms.push(u64::try_from(t.elapsed().as_millis()).unwrap_or(u64::MAX));
        } else {
            no_write += 1;
        }
        start(args, nodes, i, false).map_err(|e| e.to_string())?;
        tokio::time::sleep(Duration::from_millis(1500)).await;
    }
    times_ms.sort_unstable();
    Ok(format!(
        "| leader SIGKILL to the next acknowledged write ({} kills; {no_leader} found no leader, {no_write} no write in {} s) | median {} ms | max {} ms | |",
        times_ms.len(),
        REELECTION_LIMIT.as_secs(),
        percentile(&times_ms, 0.5),
        times_ms.last().copied().unwrap_or(0)
    ))
}

/// Three replicas started, and a client (whose calls wait up to `deadline`) that has seen
/// a write acknowledged.
async fn start_cluster(
    args: &Args,
    deadline: Duration,
) -> Result<(Vec<Node>, Arc<Client>), String> {
    let mut nodes = Vec::new();
    for id in 1..=3u64 {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        nodes.push(Node {
            id,
            addr: format!("127.0.0.1:{port}"),
            child: None,
        });
    }
    for i in 0..3 {
        start(args, &mut nodes, i, i == 0).map_err(|e| e.to_string())?;
    }
    let endpoints: Vec<String> = nodes.iter().map(|n| n.addr.clone()).collect();
    let mut client = Client::new(endpoints, None)
        .map_err(|e| e.to_string())?
        .with_deadline(deadline);
    if let Some(dir) = &args.tls_dir {
        let ca = dir.join("ca.pem");
        client = client.with_tls(std::fs::read(&ca).map_err(|e| format!("{}: {e}", ca.display()))?);
    }
    let client = Arc::new(client);
    client
        .put(b"warmup", b"1")
        .await
        .map_err(|e| format!("no leader: {e}"))?;
    Ok((nodes, client))
}

fn stop_cluster(nodes: &mut [Node]) {
    for n in nodes {
        if let Some(mut child) = n.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Texts written per batch in the embedding figure.
const TEXTS_PER_BATCH: u32 = 64;

/// A sentence of about 15 words, different for each `i`.
fn sentence(i: u32) -> String {
    const WORDS: [&str; 24] = [
        "river", "granite", "violin", "tide", "lichen", "harbour", "lantern", "meadow", "copper",
        "orchard", "glacier", "sparrow", "engine", "ledger", "quarry", "thistle", "compass",
        "furnace", "willow", "beacon", "saddle", "marble", "falcon", "pepper",
    ];
    let mut x = u64::from(i).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut word = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        WORDS[(x % WORDS.len() as u64) as usize]
    };
    format!(
        "note {i}: the {} near the {} was found beside a {} and an old {} in the {} season",
        word(),
        word(),
        word(),
        word(),
        ["dry", "wet", "cold", "warm"][i as usize % 4]
    )
}

/// Text ingest under an all-MiniLM-L6-v2 index: into single-node Shale (the index's
/// workers embed), then into the cluster (the leader embeds, the replicas index the
/// vectors the log carries), each timed from the first write until every copy has
/// indexed every text.
async fn embedding(args: &Args) -> Result<Vec<String>, String> {
    let n = args.embedding_texts;
    let mut out = vec![
        "| measurement | texts/s | seconds | |".to_string(),
        "|---|---|---|---|".to_string(),
    ];
    let model = shale_embed::load_default()
        .map_err(|e| e.to_string())?
        .embedder;
    let db = Arc::new(
        shale::Db::open(args.dir.join("single"), shale::Options::default())
            .map_err(|e| e.to_string())?,
    );
    let index = shale_search::semantic::Index::open(
        &db,
        "notes",
        shale_search::semantic::IndexOptions::text(model).prefix("n/"),
    )
    .map_err(|e| e.to_string())?;
    let single = tokio::task::spawn_blocking(move || {
        // The model's first run sets up its sessions: not part of the figure, here or in
        // the cluster.
        index.embed("warm up").map_err(|e| e.to_string())?;
        let t = Instant::now();
        for first in (0..n).step_by(TEXTS_PER_BATCH as usize) {
            let mut b = shale::WriteBatch::new();
            for i in first..(first + TEXTS_PER_BATCH).min(n) {
                b.put(format!("n/{i:08}"), sentence(i));
            }
            db.write(b, shale::WriteOptions::sync())
                .map_err(|e| e.to_string())?;
        }
        index.wait_indexed().map_err(|e| e.to_string())?;
        let secs = t.elapsed().as_secs_f64();
        drop(index);
        db.close().map_err(|e| e.to_string())?;
        Ok::<f64, String>(secs)
    })
    .await
    .map_err(|e| e.to_string())??;
    out.push(format!(
        "| single-node Shale, {n} texts in batches of {TEXTS_PER_BATCH}, until indexed | {:.0} | {single:.1} | |",
        f64::from(n) / single
    ));

    // A batch of texts waits for the leader's model.
    let (mut nodes, client) = start_cluster(args, Duration::from_secs(60)).await?;
    let result = replicated_ingest(&nodes, &client, n, args.text_clients).await;
    stop_cluster(&mut nodes);
    let secs = result?;
    let how = if args.embed_on_every_replica {
        "every replica embeds"
    } else {
        "the leader embeds once"
    };
    out.push(format!(
        "| 3 replicas ({how}), {n} texts in batches of {TEXTS_PER_BATCH} from {} clients, until every replica indexed | {:.0} | {secs:.1} | {:.2}x single-node |",
        args.text_clients,
        f64::from(n) / secs,
        single / secs
    ));
    Ok(out)
}

/// Seconds from the first write of `n` texts into the cluster until every replica has
/// applied the last and has nothing left to index.
async fn replicated_ingest(
    nodes: &[Node],
    client: &Arc<Client>,
    n: u32,
    clients: u32,
) -> Result<f64, String> {
    let defined = client
        .define_index_with(shale_client::pb::DefineIndexRequest {
            name: "notes".into(),
            prefix: b"n/".to_vec(),
            dim: 384,
            metric: shale_client::pb::Metric::Cosine.into(),
            model: shale_client::pb::Model::Minilm.into(),
            ..Default::default()
        })
        .await
        .map_err(|e| format!("define the index: {e}"))?;
    // Every replica has loaded the model and the leader has run it once (as the single
    // node had before its clock started).
    let warm = client
        .put(b"n/warm-up", b"warm up")
        .await
        .map_err(|e| format!("warm up: {e}"))?;
    wait_indexed(nodes, client, warm.max(defined)).await?;
    let t = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..clients {
        let client = Arc::clone(client);
        tasks.push(tokio::spawn(async move {
            let mut last = 0;
            let batches = (0..n).step_by(TEXTS_PER_BATCH as usize);
            for first in batches.skip(c as usize).step_by(clients as usize) {
                let ops: Vec<(Vec<u8>, Option<Vec<u8>>)> = (first
                    ..(first + TEXTS_PER_BATCH).min(n))
                    .map(|i| {
                        (
                            format!("n/{i:08}").into_bytes(),
                            Some(sentence(i).into_bytes()),
                        )
                    })
                    .collect();
                last = last.max(client.batch(&ops).await.map_err(|e| e.to_string())?);
            }
            Ok::<u64, String>(last)
        }));
    }
    let mut last = 0;
    for task in tasks {
        last = last.max(task.await.map_err(|e| e.to_string())??);
    }
    wait_indexed(nodes, client, last).await?;
    Ok(t.elapsed().as_secs_f64())
}

/// Wait until every node has applied log index `index` and has nothing left to index.
async fn wait_indexed(nodes: &[Node], client: &Client, index: u64) -> Result<(), String> {
    let t = Instant::now();
    for node in nodes {
        loop {
            let s = client
                .status_of(&node.addr)
                .await
                .map_err(|e| e.to_string())?;
            if s.applied_index >= index && s.indexing_backlog == 0 {
                break;
            }
            if t.elapsed() > Duration::from_secs(1800) {
                return Err(format!(
                    "node {} did not index up to {index} in 30 min",
                    node.id
                ));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    Ok(())
}

/// A fourth replica joins (`--join`: a learner, then a voter) with an empty directory:
/// the time until it has applied what the leader had applied when it started, and the
/// size of the leader's snapshot it was sent.
/// The position in `nodes` of the leader some node names, asking until one does (up to
/// 10 s): a replica that has just restarted may not know the leader yet.
async fn wait_for_leader(client: &Client, nodes: &[Node]) -> Option<usize> {
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        for n in nodes {
            if let Ok(s) = client.status_of(&n.addr).await {
                if let Some(i) = s
                    .leader_id
                    .and_then(|l| nodes.iter().position(|n| n.id == l))
                {
                    return Some(i);
                }
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    None
}

async fn catch_up(args: &Args, nodes: &mut Vec<Node>, client: &Client) -> Result<String, String> {
    let mut leader = None;
    for n in nodes.iter() {
        if let Ok(s) = client.status_of(&n.addr).await {
            leader = s.leader_id;
            break;
        }
    }
    let leader = leader.ok_or("no leader before the catch-up")?;
    let leader_addr = nodes
        .iter()
        .find(|n| n.id == leader)
        .map(|n| n.addr.clone())
        .ok_or("the leader is not a known node")?;
    let target = client
        .status_of(&leader_addr)
        .await
        .map_err(|e| e.to_string())?
        .applied_index;
    let snap = args
        .dir
        .join(format!("node-{leader}"))
        .join("state/snapshots/current.snap");
    let bytes = std::fs::metadata(&snap).map(|m| m.len()).unwrap_or(0);
    let port = TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| e.to_string())?
        .port();
    nodes.push(Node {
        id: 4,
        addr: format!("127.0.0.1:{port}"),
        child: None,
    });
    let new = nodes.len() - 1;
    let t = Instant::now();
    start(args, nodes, new, false).map_err(|e| e.to_string())?;
    let addr = nodes.get(new).map(|n| n.addr.clone()).unwrap_or_default();
    loop {
        if let Ok(s) = client.status_of(&addr).await {
            if s.applied_index >= target {
                break;
            }
        }
        if t.elapsed() > Duration::from_secs(120) {
            return Err(format!(
                "the new replica did not reach index {target} in 120 s"
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let secs = t.elapsed().as_secs_f64();
    let mb = bytes as f64 / 1e6;
    Ok(format!(
        "| a new replica caught up by snapshot ({mb:.1} MB, index {target}) | {:.1} MB/s | {:.0} ms in all | |",
        mb / secs,
        secs * 1000.0
    ))
}

fn main() -> ExitCode {
    let args = Args::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("shale-figures: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
        Ok(lines) => {
            for l in lines {
                println!("{l}");
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("shale-figures: {e}");
            ExitCode::FAILURE
        }
    }
}
