//! Write rates of `shale-bench cluster`: single-node Shale with sync writes, then the
//! cluster's replicated puts and batches, each a row of the table. Runs on the async
//! runtime; the single node's writes go to blocking threads.

use std::path::Path;
use std::sync::Arc;

use shale_client::Client;

use super::measure::{drive, row};

/// Single-node Shale in `dir`, sync puts, same machine, same run: a row for 1 and 64
/// clients.
pub async fn single_node(dir: &Path, seconds: u64, value: &[u8]) -> Result<Vec<String>, String> {
    let single =
        Arc::new(shale::Db::open(dir, shale::Options::default()).map_err(|e| e.to_string())?);
    let mut out = Vec::new();
    for clients in [1usize, 64] {
        let db = Arc::clone(&single);
        let v = value.to_vec();
        let (rate, lat) = drive(clients, seconds, move |c, n| {
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
        let what = format!("single-node Shale, sync puts, {clients} client(s)");
        out.push(row(&what, rate, "writes/s", &lat));
    }
    single.close().map_err(|e| e.to_string())?;
    Ok(out)
}

/// Replicated puts (1 and 64 clients) and batches of 100 keys (8 clients): a row each.
pub async fn replicated(client: &Arc<Client>, seconds: u64, value: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for clients in [1usize, 64] {
        let c = Arc::clone(client);
        let v = value.to_vec();
        let (rate, lat) = drive(clients, seconds, move |id, n| {
            let c = Arc::clone(&c);
            let v = v.clone();
            async move { c.put(format!("c{id}-{n}").as_bytes(), &v).await.is_ok() }
        })
        .await;
        let what = format!("replicated puts, {clients} client(s)");
        out.push(row(&what, rate, "writes/s", &lat));
    }
    let c = Arc::clone(client);
    let v = value.to_vec();
    let (rate, lat) = drive(8, seconds, move |id, n| {
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
    let what = "replicated batches of 100 keys, 8 clients";
    out.push(row(what, rate * 100.0, "keys/s", &lat));
    out
}
