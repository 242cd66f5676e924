//! The commands that speak to a replicated server (`--server ADDR`, crates/shale-server)
//! instead of opening a directory: put, get, del, cas, scan, search (of the index
//! `--index`), import (of the line formats, each batch one atomic write), define-index, and
//! the cluster's status and membership, through its Rust client, which finds the leader
//! and retries what is safe to retry. Output is the same as for a
//! directory. The token, if the cluster has one, comes from `SHALE_TOKEN` (never an
//! argument, which other users could read in the process list).
//!
//! Reads are linearizable, each on its own: a `get` of several keys reads them one after
//! another, not at one moment as `get` on a directory does. A write whose outcome the
//! client cannot know (the leader failed after it proposed) is an error that says so.

use std::io::Write;

use shale_client::pb::{self, SearchRequest};
use shale_client::{Client, ClientError};
use shale_search::vector::Metric;
use shale_search::Analyzer;

use crate::args::{CasArgs, Cli, Command, Format, ImportArgs, ScanArgs, SearchArgs};
use crate::embedder::EmbedderKind;
use crate::error::{CliError, Result};
use crate::escape::escape;
use crate::import;
use crate::kv::{self, KeyRange};

/// Pairs one scan call asks for.
const SCAN_PAGE: u32 = 1000;

impl From<ClientError> for CliError {
    fn from(e: ClientError) -> Self {
        CliError::Server(e.to_string())
    }
}

/// Run `cli`'s command against the cluster at `servers`.
pub fn run(cli: &Cli, out: &mut impl Write, servers: &[String]) -> Result<()> {
    let client = connect(cli, servers)?;
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
            Command::Get { keys, raw, json } => get(cli, &client, out, keys, *raw, *json).await,
            Command::Cas(args) => cas(cli, &client, out, args).await,
            Command::Scan(args) => scan(cli, &client, out, args).await,
            Command::Search(args) => search(cli, &client, out, args).await,
            Command::DefineIndex => {
                client.define_index_with(index_definition(cli)?).await?;
                Ok(())
            }
            Command::DefineTextIndex { analyzer } => {
                client
                    .define_index_with(text_index_definition(cli, analyzer)?)
                    .await?;
                Ok(())
            }
            Command::ClusterStatus => cluster_status(&client, out, servers).await,
            Command::Shards => shards(&client, out).await,
            Command::Split { group, at, child } => {
                let split = client.split(*group, &cli.bytes(at)?, *child).await?;
                for s in [split.kept, split.child].into_iter().flatten() {
                    print_shard(out, s.group, &s.start, s.end.as_deref(), s.version, None)?;
                }
                Ok(())
            }
            Command::Backup { file } => backup(&client, out, file).await,
            Command::AddLearner { .. }
            | Command::AddVoters { .. }
            | Command::RemoveVoters { .. }
            | Command::SetAddress { .. }
            | Command::TransferLeader { .. }
            | Command::MoveReplica { .. } => membership(&client, out, &cli.command).await,
            _ => Err(CliError::Usage(
                "over --server only put, get, del, cas, scan, search, import, define-index, \
                 define-text-index, cluster-status, shards, split, backup, add-learner, \
                 add-voters, remove-voters, set-address, transfer-leader and move-replica \
                 are available; \
                 the other commands need --db DIR"
                    .into(),
            )),
        }
    })
}

/// Run a membership command: `add-learner`, `add-voters`, `remove-voters`, `set-address`,
/// `transfer-leader` or `move-replica`.
async fn membership(client: &Client, out: &mut impl Write, command: &Command) -> Result<()> {
    let changed = match command {
        Command::AddLearner { id, addr } => client.add_learner(*id, addr).await?,
        Command::AddVoters { ids } => client.add_voters(ids).await?,
        Command::RemoveVoters { ids } => client.remove_voters(ids).await?,
        Command::SetAddress { id, addr } => client.set_address(*id, addr).await?,
        Command::MoveReplica {
            group,
            from,
            to,
            addr,
        } => client.move_replica(*group, *from, *to, addr).await?,
        Command::TransferLeader { id } => {
            let term = client.transfer_leader(*id).await?;
            return writeln!(out, "node {id} leads, term {term}").map_err(CliError::Stdout);
        }
        _ => return Err(CliError::Usage("not a membership command".into())),
    };
    print_membership(out, &changed)
}

/// A client of the cluster at `servers`, with `SHALE_TOKEN` and `--tls-ca`.
fn connect(cli: &Cli, servers: &[String]) -> Result<Client> {
    let token = std::env::var("SHALE_TOKEN").ok().filter(|t| !t.is_empty());
    let client = Client::new(servers.to_vec(), token)?;
    let Some(ca) = &cli.tls_ca else {
        return Ok(client);
    };
    let pem = std::fs::read(ca)
        .map_err(|e| CliError::Usage(format!("--tls-ca {}: {e}", ca.display())))?;
    Ok(client.with_tls(pem))
}

/// `get KEY...`: each key read linearizably, one after another.
async fn get(
    cli: &Cli,
    client: &Client,
    out: &mut impl Write,
    keys: &[String],
    raw: bool,
    json: bool,
) -> Result<()> {
    let keys = keys
        .iter()
        .map(|k| cli.bytes(k))
        .collect::<Result<Vec<_>>>()?;
    let mut values = Vec::with_capacity(keys.len());
    for key in &keys {
        values.push(client.get(key).await?);
    }
    kv::print_values(out, &keys, &values, raw, json)
}

/// `cas`: one compare-and-set through the log.
async fn cas(cli: &Cli, client: &Client, out: &mut impl Write, args: &CasArgs) -> Result<()> {
    let cas = args.parse(cli)?;
    let outcome = client
        .compare_and_set(&cas.key, cas.expected.as_deref(), cas.new_value.as_deref())
        .await?;
    kv::cas_outcome(out, &cas.key, outcome.swapped, outcome.current.as_deref())
}

/// `define-text-index`: the index definition of the global options, with the keyword
/// index `analyzer` names.
fn text_index_definition(cli: &Cli, analyzer: &str) -> Result<pb::DefineIndexRequest> {
    let keywords = match Analyzer::from_name(analyzer) {
        Some(Analyzer::Simple) => pb::Analyzer::Simple,
        Some(Analyzer::English) => pb::Analyzer::English,
        Some(Analyzer::Cjk) => pb::Analyzer::Cjk,
        None => {
            return Err(CliError::Usage(format!(
                "{analyzer:?} is not an analyzer (simple, english or cjk)"
            )))
        }
    };
    Ok(pb::DefineIndexRequest {
        keywords: keywords.into(),
        ..index_definition(cli)?
    })
}

/// `backup FILE`: an online backup of the cluster, written to FILE.
async fn backup(client: &Client, out: &mut impl Write, file: &std::path::Path) -> Result<()> {
    let bytes = client.backup(file).await?;
    writeln!(out, "backup of {bytes} bytes in {}", file.display()).map_err(CliError::Stdout)
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
fn import(runtime: &tokio::runtime::Runtime, client: &Client, args: &ImportArgs) -> Result<()> {
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
    let max_ops = shale_client::wire::MAX_OPS_PER_COMMAND;
    import::load(args, None, &mut sink, max_ops)
}

/// `search` on the cluster's index `--index` (default `default`), by text or vector; with
/// `--keyword` or `--hybrid`, by its keyword index too.
async fn search(cli: &Cli, client: &Client, out: &mut impl Write, args: &SearchArgs) -> Result<()> {
    if args.highlight {
        return Err(CliError::Usage(
            "--highlight is not available over --server".into(),
        ));
    }
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
        mode: match (args.keyword, args.hybrid) {
            (true, _) => pb::SearchMode::Keywords,
            (false, true) => pb::SearchMode::Hybrid,
            (false, false) => pb::SearchMode::Meaning,
        }
        .into(),
        r#match: match args.match_mode.as_str() {
            "all" => pb::TermMatch::All,
            "phrase" => pb::TermMatch::Phrase,
            _ => pb::TermMatch::Any,
        }
        .into(),
        fusion: match args.fusion.as_str() {
            "minmax" => pb::Fusion::MinMax,
            _ => pb::Fusion::Rrf,
        }
        .into(),
        window: None,
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

/// The definition `define-index` proposes: the global index options, with the defaults a
/// new index gets on a directory (MiniLM, its dimension, cosine). The prefix is required:
/// a cluster refuses an index over every key, since its own metadata shares the database.
fn index_definition(cli: &Cli) -> Result<pb::DefineIndexRequest> {
    let args = &cli.index_args;
    let prefix = match &args.index_prefix {
        Some(p) if !p.is_empty() => cli.bytes(p)?,
        _ => {
            return Err(CliError::Usage(
                "define-index over --server needs --index-prefix P".into(),
            ))
        }
    };
    let (model, model_dim) = match args.embedder.unwrap_or(EmbedderKind::Minilm) {
        EmbedderKind::Minilm => (pb::Model::Minilm, Some(shale_embed::DIM)),
        EmbedderKind::Hash => (
            pb::Model::Hash,
            Some(shale_search::semantic::HashEmbedder::DIM),
        ),
        EmbedderKind::None => (pb::Model::Vectors, None),
    };
    let dim = args.dim.or(model_dim).ok_or_else(|| {
        CliError::Usage(
            "--embedder none needs --dim N, the dimension of the index's vectors".into(),
        )
    })?;
    let metric = match args.metric.unwrap_or(Metric::Cosine) {
        Metric::Cosine => pb::Metric::Cosine,
        Metric::Dot => pb::Metric::Dot,
        Metric::L2 => pb::Metric::L2,
    };
    Ok(pb::DefineIndexRequest {
        name: args.name().to_owned(),
        prefix,
        dim: u32::try_from(dim).map_err(|_| CliError::Usage(format!("--dim {dim}")))?,
        metric: metric.into(),
        model: model.into(),
        keywords: pb::Analyzer::NoKeywords.into(),
    })
}

/// `cluster-status`: each address's own view, one tab-separated line each: the address,
/// `node=ID`, `leader=ID` (or `leader=none`), `applied=INDEX`, `term=T`, `backlog=N` (changes
/// its indexes have not indexed yet); an address that
/// does not answer gets its error instead, and the command exits 2 after the last one.
async fn cluster_status(client: &Client, out: &mut impl Write, servers: &[String]) -> Result<()> {
    let mut failed = None;
    for addr in servers {
        match client.status_of(addr).await {
            Ok(s) => {
                let leader = s.leader_id.map_or("none".to_owned(), |id| id.to_string());
                writeln!(
                    out,
                    "{addr}\tnode={}\tleader={leader}\tapplied={}\tterm={}\tbacklog={}",
                    s.node_id, s.applied_index, s.term, s.indexing_backlog
                )
                .map_err(CliError::Stdout)?;
            }
            Err(e) => {
                writeln!(out, "{addr}\terror: {e}").map_err(CliError::Stdout)?;
                failed = Some(e);
            }
        }
    }
    match failed {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// `group=N  start=KEY  end=KEY|end  version=V  leader=ADDR|none`, one line a shard, keys
/// escaped.
async fn shards(client: &Client, out: &mut impl Write) -> Result<()> {
    for s in client.shards().await? {
        let leader = Some(s.leader_addr.as_deref().unwrap_or("none"));
        print_shard(out, s.group, &s.start, s.end.as_deref(), s.version, leader)?;
    }
    Ok(())
}

/// One shard: `group=G`, `start=..`, `end=..` (`end`: to the end), `version=V`, and its
/// `leader=..` when given.
fn print_shard(
    out: &mut impl Write,
    group: u64,
    start: &[u8],
    end: Option<&[u8]>,
    version: u64,
    leader: Option<&str>,
) -> Result<()> {
    let end = end.map_or("end".to_owned(), escape);
    let leader = leader.map(|l| format!("\tleader={l}")).unwrap_or_default();
    writeln!(
        out,
        "group={group}\tstart={}\tend={end}\tversion={version}{leader}",
        escape(start),
    )
    .map_err(CliError::Stdout)
}

/// The membership a change put in force: `index=N`, `voters=1,2,3`, `learners=4`.
fn print_membership(out: &mut impl Write, m: &pb::MembershipResponse) -> Result<()> {
    let list = |ids: &[u64]| ids.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
    writeln!(
        out,
        "index={}\tvoters={}\tlearners={}",
        m.index,
        list(&m.voters),
        list(&m.learners)
    )
    .map_err(CliError::Stdout)
}
