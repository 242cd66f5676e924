//! Text ingest under an all-MiniLM-L6-v2 index for `shale-bench cluster --embedding-texts`
//! (feature `semantic`): into single-node Shale (the index's workers embed), then into the
//! cluster (the leader embeds, the replicas index the vectors the log carries), each timed
//! from the first write until every copy has indexed every text (docs/replication.md,
//! "Embed once"). The single node runs on a blocking thread; the cluster's clients are
//! tasks of the async runtime.

use std::sync::Arc;
use std::time::{Duration, Instant};

use shale_client::Client;

use super::args::ClusterArgs;
use super::replica::{start_cluster, stop_cluster, Node};

/// Texts written per batch in the embedding figure.
const TEXTS_PER_BATCH: u32 = 64;

/// The embedding figure's table: a row for the single node and one for the cluster.
pub async fn rows(args: &ClusterArgs) -> Result<Vec<String>, String> {
    let n = args.embedding_texts;
    let mut out = vec![
        "| measurement | texts/s | seconds | |".to_string(),
        "|---|---|---|---|".to_string(),
    ];
    let dir = args.dir.join("single");
    let single = tokio::task::spawn_blocking(move || single_node_ingest(&dir, n))
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

/// Seconds to write `n` texts into single-node Shale in `dir`, in sync batches, until its
/// semantic index has indexed them all.
fn single_node_ingest(dir: &std::path::Path, n: u32) -> Result<f64, String> {
    let model = shale_embed::load_default()
        .map_err(|e| e.to_string())?
        .embedder;
    let db = Arc::new(shale::Db::open(dir, shale::Options::default()).map_err(|e| e.to_string())?);
    let index = shale_search::semantic::VectorIndex::open(
        &db,
        "notes",
        shale_search::semantic::VectorIndexOptions::text(model).prefix("n/"),
    )
    .map_err(|e| e.to_string())?;
    // The model's first run sets up its sessions: not part of the figure, here or in the
    // cluster.
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
    Ok(secs)
}

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
    let tasks: Vec<_> = (0..clients)
        .map(|c| tokio::spawn(write_texts(Arc::clone(client), n, c, clients)))
        .collect();
    let mut last = 0;
    for task in tasks {
        last = last.max(task.await.map_err(|e| e.to_string())??);
    }
    wait_indexed(nodes, client, last).await?;
    Ok(t.elapsed().as_secs_f64())
}

/// Client `c` of `clients`: every `clients`-th batch of the `n` texts, starting at the
/// `c`-th; the log index of its last write.
async fn write_texts(client: Arc<Client>, n: u32, c: u32, clients: u32) -> Result<u64, String> {
    let mut last = 0;
    let batches = (0..n).step_by(TEXTS_PER_BATCH as usize);
    for first in batches.skip(c as usize).step_by(clients as usize) {
        let ops: Vec<(Vec<u8>, Option<Vec<u8>>)> = (first..(first + TEXTS_PER_BATCH).min(n))
            .map(|i| {
                (
                    format!("n/{i:08}").into_bytes(),
                    Some(sentence(i).into_bytes()),
                )
            })
            .collect();
        last = last.max(client.batch(&ops).await.map_err(|e| e.to_string())?);
    }
    Ok(last)
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
