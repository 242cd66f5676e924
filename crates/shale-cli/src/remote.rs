//! The commands that speak to a replicated server (`--server ADDR`, crates/shale-server)
//! instead of opening a directory: put, get, del, scan, search (of the index `--index`) and
//! import (of the line formats, each batch one atomic write), through its Rust client, which
//! finds the leader and retries what is safe to retry. Output is the same as for a
//! directory. The token, if the cluster has one, comes from `SHALE_TOKEN` (never an
//! argument, which other users could read in the process list).
//!
//! Reads are linearizable, each on its own: a `get` of several keys reads them one after
//! another, not at one moment as `get` on a directory does. A write whose outcome the
//! client cannot know (the leader failed after it proposed) is an error that says so.

use std::io::Write;

use shale_server::pb::SearchRequest;
use shale_server::{Client, ClientError};

use crate::error::{CliError, Result};
use crate::import;
use crate::kv::{self, KeyRange, ScanArgs};
use crate::{Cli, Command, Format};

/// Pairs one scan call asks for.
const SCAN_PAGE: u32 = 1000;

impl From<ClientError> for CliError {
    fn from(e: ClientError) -> Self {
        CliError::Server(e.to_string())
    }
}

/// Run `cli`'s command against the cluster at `servers`.
pub fn run(cli: &Cli, out: &mut impl Write, servers: &[String]) -> Result<()> {
    let token = std::env::var("SHALE_TOKEN").ok().filter(|t| !t.is_empty());
    let client = Client::new(servers.to_vec(), token)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| CliError::Server(format!("cannot start the async runtime: {e}")))?;
    if let Command::Import(args) = &cli.command {
        return import(&runtime, &client, args);
    }
    runtime.block_on(async {
        match &cli.command {
            Command::Put { ttl: Some(_), .. } => Err(CliError::Usage(
                "--ttl is not available over --server".into(),
            )),
            Command::Put {
                key,
                value,
                ttl: None,
            } => {
                client.put(&cli.bytes(key)?, &cli.bytes(value)?).await?;
                Ok(())
            }
            Command::Del { key } => {
                client.delete(&cli.bytes(key)?).await?;
                Ok(())
            }
            Command::Get { keys, raw, json } => {
                let keys = keys
                    .iter()
                    .map(|k| cli.bytes(k))
                    .collect::<Result<Vec<_>>>()?;
                let mut values = Vec::with_capacity(keys.len());
                for key in &keys {
                    values.push(client.get(key).await?);
                }
                kv::print_values(out, &keys, &values, *raw, *json)
            }
            Command::Scan(args) => scan(cli, &client, out, args).await,
            Command::Search(args) => search(cli, &client, out, args).await,
            _ => Err(CliError::Usage(
                "over --server only put, get, del, scan, search and import are available; \
                 the other commands need --db DIR"
                    .into(),
            )),
        }
    })
}

/// A batch for the cluster.
struct ServerSink<'a> {
    runtime: &'a tokio::runtime::Runtime,
    client: &'a Client,
    ops: Vec<(Vec<u8>, Option<Vec<u8>>)>,
    bytes: usize,
}

impl import::Sink for ServerSink<'_> {
    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.bytes += key.len() + value.len();
        self.ops.push((key, Some(value)));
    }
    fn pending(&self) -> (usize, usize) {
        (self.bytes, self.ops.len())
    }
    fn write(&mut self) -> Result<()> {
        let ops = std::mem::take(&mut self.ops);
        self.bytes = 0;
        self.runtime.block_on(self.client.batch(&ops))?;
        Ok(())
    }
}

/// `import` of a line format, each batch one write to the cluster (at most the entries
/// one log command takes).
fn import(
    runtime: &tokio::runtime::Runtime,
    client: &Client,
    args: &import::ImportArgs,
) -> Result<()> {
    import::check_args(args)?;
    if matches!(args.format, Format::Npy | Format::VectorsJsonl) {
        return Err(CliError::Usage(
            "over --server, import takes --format lines, tsv or jsonl".into(),
        ));
    }
    let mut sink = ServerSink {
        runtime,
        client,
        ops: Vec::new(),
        bytes: 0,
    };
    let max_ops = shale_server::command::MAX_OPS_PER_COMMAND;
    import::load(args, None, &mut sink, max_ops)
}

/// `search` on the cluster's index `--index` (default `default`), by text or vector.
async fn search(
    cli: &Cli,
    client: &Client,
    out: &mut impl Write,
    args: &crate::search::SearchArgs,
) -> Result<()> {
    let range = KeyRange::new(cli, &args.from, &args.to, &args.prefix)?;
    if range.is_empty() {
        return crate::search::print_hits(out, &[], args.json);
    }
    let query = crate::vectors::query(args.vector.as_deref(), args.vector_file.as_deref())?;
    let k = u32::try_from(args.k).map_err(|_| CliError::Usage(format!("-k {}", args.k)))?;
    let req = SearchRequest {
        index: cli
            .index_args
            .index
            .clone()
            .unwrap_or_else(|| "default".into()),
        vector: query.map(|(_, v)| v).unwrap_or_default(),
        text: args.text.clone(),
        k,
        ef: args.ef.map(|ef| u32::try_from(ef).unwrap_or(u32::MAX)),
        exact: args.exact,
        from: range.lower,
        to: range.upper,
    };
    let hits = client.search_with(req).await?;
    let rows: Vec<(&[u8], f32, &[u8])> = hits
        .iter()
        .map(|h| (h.key.as_slice(), h.score, h.payload.as_slice()))
        .collect();
    crate::search::print_hits(out, &rows, args.json)
}

/// `scan` page by page, each page a linearizable read.
async fn scan(cli: &Cli, client: &Client, out: &mut impl Write, args: &ScanArgs) -> Result<()> {
    if args.reverse {
        return Err(CliError::Usage(
            "--reverse is not available over --server".into(),
        ));
    }
    let range = KeyRange::new(cli, &args.from, &args.to, &args.prefix)?;
    if range.is_empty() {
        return Ok(());
    }
    let mut left = args.limit.unwrap_or(usize::MAX);
    let mut start = range.lower.unwrap_or_default();
    while left > 0 {
        let page = u32::try_from(left).unwrap_or(u32::MAX).min(SCAN_PAGE);
        let (pairs, next) = client.scan(&start, range.upper.as_deref(), page).await?;
        for (key, value) in pairs.iter().take(left) {
            kv::write_pair(out, key, value, args.json).map_err(CliError::Stdout)?;
        }
        left = left.saturating_sub(pairs.len());
        match next {
            Some(next) => start = next,
            None => break,
        }
    }
    Ok(())
}
