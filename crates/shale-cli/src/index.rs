//! Which semantic index a command opens, and `index-stats`.
//!
//! The global options name the index and say what it is: `--index NAME` (default
//! `default`), over the keys under `--index-prefix`, scored by `--metric`, embedding text
//! with `--embedder` or, with `--embedder none`, holding the user's vectors of `--dim`
//! dimensions. Every run of the CLI opens the index anew. The index's directory records
//! its definition (`MODEL`, docs/format.md section 10), and what a command leaves out is
//! taken from it: an existing index opens as it was, and the options are needed only to
//! create one or to change it (a new prefix or metric reuses the vectors; another model
//! embeds every text again, as `--embedder` documents).
//!
//! Two changes would leave an index unable to hold what it holds, and are refused from
//! the record before the open: vectors given by the user under another dimension, and a
//! text index opened without a model.

use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, Instant};

use shale_search::semantic::{Embedder, Index, IndexDefinition, IndexOptions, USER_VECTORS};
use shale_search::vector::Metric;

use crate::embedder::{self, EmbedderKind};
use crate::error::{CliError, Result};
use crate::escape::{escape, json_bytes};
use crate::Cli;

/// The index opened when `--index` is not given, over every key (the one Python's
/// `semantic=True` opens too).
pub const DEFAULT_INDEX: &str = "default";

/// The global options that choose and describe the index.
#[derive(clap::Args, Debug)]
#[command(next_help_heading = "Semantic index (search, index-stats, --semantic)")]
pub struct IndexArgs {
    /// The semantic index to open ([A-Za-z0-9_-], default "default"). Naming one turns
    /// --semantic on.
    #[arg(long, global = true, value_name = "NAME")]
    pub index: Option<String>,

    /// The keys the index covers: those that start with P (default: the index's recorded
    /// prefix, or every key for a new index). Values under it must be UTF-8 text or
    /// vectors; keys outside it hold any bytes.
    #[arg(long, global = true, value_name = "P")]
    pub index_prefix: Option<String>,

    /// How the index scores: cosine, dot or l2 (higher is closer: cosine similarity, inner
    /// product, or minus the squared distance) [default: the index's recorded metric, or
    /// cosine for a new index].
    #[arg(long, global = true, value_name = "METRIC", value_parser = parse_metric)]
    pub metric: Option<Metric>,

    /// The dimension of the index's vectors (needed with --embedder none for a new index;
    /// with a model, it must be the model's).
    #[arg(long, global = true, value_name = "N")]
    pub dim: Option<usize>,

    /// The embedding model for the index [default: minilm; an index of the user's vectors
    /// keeps none]. `hash` is a word-hashing stand-in with no model files: it matches shared
    /// words, not meanings. `none`: an index of vectors given by the user, with --dim.
    #[arg(long, global = true, value_enum)]
    pub embedder: Option<EmbedderKind>,
}

fn parse_metric(name: &str) -> std::result::Result<Metric, String> {
    Metric::parse(name).map_err(|_| format!("{name:?} is not a metric (cosine, dot or l2)"))
}

impl IndexArgs {
    /// The index's name.
    pub fn name(&self) -> &str {
        self.index.as_deref().unwrap_or(DEFAULT_INDEX)
    }
}

/// An open index and the model it embeds with.
pub struct OpenIndex {
    pub index: Index,
    /// The embedder's model id; `None` for an index of the user's vectors.
    pub model_id: Option<String>,
}

/// Open the index the global options describe on `db`.
///
/// # Errors
/// `Usage` for `--embedder none` without a dimension, or options the index's record rules
/// out (see the module documentation); the engine's `InvalidOptions` (a bad name, a `--dim`
/// that is not the model's) and open errors; a model that cannot be loaded.
pub fn open(cli: &Cli, db: &Arc<shale::Db>) -> Result<OpenIndex> {
    let args = &cli.index_args;
    let name = args.name();
    // A missing or damaged record is the engine's to handle at open (it starts the store
    // over); nothing to check or reuse here.
    let recorded = Index::definition(db, name).ok().flatten();
    let user_vectors = recorded.as_ref().filter(|r| r.model_id == USER_VECTORS);
    let kind = match (args.embedder, user_vectors) {
        (Some(kind), _) => kind,
        (None, Some(_)) => EmbedderKind::None,
        (None, None) => EmbedderKind::Minilm,
    };
    // The dimension before the model: a mismatch is refused without loading one.
    let dim = match (args.dim, kind, user_vectors) {
        (Some(dim), _, _) => Some(dim),
        (None, EmbedderKind::Hash, _) => Some(shale_search::semantic::HashEmbedder::DIM),
        (None, EmbedderKind::Minilm, _) => Some(shale_embed::DIM),
        (None, EmbedderKind::None, Some(r)) => Some(r.dim),
        (None, EmbedderKind::None, None) => None,
    };
    if let Some(r) = &recorded {
        check_record(name, r, kind, dim)?;
    }
    let dim = dim.ok_or_else(|| {
        CliError::Usage(
            "--embedder none needs --dim N, the dimension of the index's vectors".into(),
        )
    })?;
    let model: Option<Arc<dyn Embedder>> = embedder::make(kind)?;
    let model_id = model.as_ref().map(|m| m.model_id());
    let mut opts = match model {
        Some(model) => IndexOptions::text(model),
        None => IndexOptions::vectors(dim),
    };
    // Given to the engine even with a model, which refuses a dimension that is not its.
    opts.dim = dim;
    let prefix = match &args.index_prefix {
        Some(p) => cli.bytes(p)?,
        None => recorded
            .as_ref()
            .map(|r| r.prefix.clone())
            .unwrap_or_default(),
    };
    let metric = args
        .metric
        .or(recorded.as_ref().map(|r| r.hnsw.metric))
        .unwrap_or(Metric::Cosine);
    let mut opts = opts.prefix(prefix).metric(metric);
    // The graph's parameters have no options here: an existing index keeps its own.
    if let Some(r) = &recorded {
        opts.hnsw = shale_search::vector::HnswParams { metric, ..r.hnsw };
    }
    let index = Index::open(db, name, opts)?;
    Ok(OpenIndex { index, model_id })
}

/// Refuse options under which the index could hold none of what it holds.
fn check_record(
    name: &str,
    recorded: &IndexDefinition,
    kind: EmbedderKind,
    dim: Option<usize>,
) -> Result<()> {
    let user_vectors = recorded.model_id == USER_VECTORS;
    let recorded_dim = recorded.dim;
    if let Some(dim) = dim.filter(|&d| user_vectors && d != recorded_dim) {
        return Err(CliError::Usage(format!(
            "index {name:?} holds vectors of {recorded_dim} dimensions given by the user; \
             opened with {dim} it could hold none of them (give --dim {recorded_dim}, or \
             another --index NAME)"
        )));
    }
    if !user_vectors && kind == EmbedderKind::None {
        return Err(CliError::Usage(format!(
            "index {name:?} holds text embedded by a model; with --embedder none it could \
             hold none of it (give its --embedder, or another --index NAME for vectors)"
        )));
    }
    Ok(())
}

/// Wait until `index` has applied every change written so far: a progress bar on a
/// terminal while it works, and a closing line on stderr.
///
/// # Errors
/// The index's: the embedder failed, the database closed.
pub fn wait_indexed(index: &Index) -> Result<()> {
    let (applied_before, queued_before) = index.progress();
    let start = Instant::now();
    if applied_before < queued_before {
        eprintln!(
            "waiting for index {:?} to embed and apply {} queued changes...",
            index.name(),
            queued_before - applied_before
        );
        let bar = indicatif::ProgressBar::new(queued_before - applied_before).with_style(
            indicatif::ProgressStyle::with_template(
                "{bar:40} {human_pos}/{human_len} changes applied {per_sec} eta {eta}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        let (done_tx, done) = std::sync::mpsc::channel();
        let waited = std::thread::scope(|scope| {
            scope.spawn(move || done_tx.send(index.wait_indexed()));
            loop {
                // The timeout paces the bar only; the wait itself is the worker's.
                match done.recv_timeout(Duration::from_millis(200)) {
                    Ok(result) => return result,
                    Err(std::sync::mpsc::RecvTimeoutError::Timeout) => {
                        let (applied, queued) = index.progress();
                        bar.set_length(queued.saturating_sub(applied_before));
                        bar.set_position(applied.saturating_sub(applied_before));
                    }
                    // The waiting thread panicked; the scope raises its panic.
                    Err(std::sync::mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
                }
            }
        });
        bar.finish_and_clear();
        waited?;
    }
    let (applied, _) = index.progress();
    eprintln!(
        "index {:?}: {} values; {} changes applied in {:.2} s",
        index.name(),
        index.stats().live,
        applied.saturating_sub(applied_before),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `index-stats`: what the index is, its counters, and what its open found.
pub fn stats(cli: &Cli, out: &mut impl Write, json: bool) -> Result<()> {
    let db = cli.open(false, true)?;
    let open = db.index_handle()?;
    let index = &open.index;
    let s = index.stats();
    let r = index.recovery();
    let (applied, queued) = index.progress();
    let counters = counters(&s);
    let recovery = recovery(&r);
    let result = if json {
        let mut doc = serde_json::Map::new();
        doc.insert("name".into(), index.name().into());
        json_bytes(&mut doc, "prefix", index.prefix());
        doc.insert("dim".into(), index.dim().into());
        doc.insert("metric".into(), index.metric().name().into());
        doc.insert("model_id".into(), open.model_id.clone().into());
        doc.insert("applied".into(), applied.into());
        doc.insert("queued_since_open".into(), queued.into());
        for (name, v) in &counters {
            doc.insert((*name).into(), (*v).into());
        }
        let mut rec: serde_json::Map<String, serde_json::Value> = recovery
            .iter()
            .map(|(name, v)| ((*name).to_owned(), (*v).into()))
            .collect();
        rec.insert("graph_damaged".into(), r.graph_damaged.into());
        rec.insert("store_damage".into(), r.store_damage.clone().into());
        doc.insert("recovery".into(), rec.into());
        writeln!(out, "{:#}", serde_json::Value::Object(doc))
    } else {
        write_text(out, open, &counters, &recovery, &r)
    };
    result.map_err(CliError::Stdout)?;
    Ok(db.close()?)
}

fn write_text(
    out: &mut impl Write,
    open: &OpenIndex,
    counters: &[(&str, u64)],
    recovery: &[(&str, u64)],
    r: &shale_search::semantic::IndexRecovery,
) -> std::io::Result<()> {
    let index = &open.index;
    writeln!(out, "index: {}", index.name())?;
    writeln!(out, "prefix: {}", escape(index.prefix()))?;
    writeln!(out, "dim: {}", index.dim())?;
    writeln!(out, "metric: {}", index.metric().name())?;
    match &open.model_id {
        Some(id) => writeln!(out, "model: {id}")?,
        None => writeln!(out, "model: none (vectors given by the user)")?,
    }
    let (applied, queued) = index.progress();
    writeln!(
        out,
        "changes since open: {applied} applied of {queued} queued"
    )?;
    for (name, v) in counters {
        writeln!(out, "{name}: {v}")?;
    }
    writeln!(out, "recovery (this open):")?;
    for (name, v) in recovery {
        writeln!(out, "  {name}: {v}")?;
    }
    writeln!(out, "  graph_damaged: {}", r.graph_damaged)?;
    match &r.store_damage {
        Some(damage) => writeln!(out, "  store_damage: {damage}"),
        None => writeln!(out, "  store_damage: none"),
    }
}

/// Every counter of [`shale_search::semantic::IndexStats`], by name.
fn counters(s: &shale_search::semantic::IndexStats) -> Vec<(&'static str, u64)> {
    let wide = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    vec![
        ("live", wide(s.live)),
        ("queued", s.queued),
        ("queued_bytes", s.queued_bytes),
        ("stalls", s.stalls),
        ("stall_micros", s.stall_micros),
        ("checkpoints", s.checkpoints),
        ("last_checkpoint_micros", s.last_checkpoint_micros),
        ("graph_bytes", s.graph_bytes),
        ("id_space", s.id_space),
        ("tracked_keys", s.tracked_keys),
    ]
}

/// The counts of [`shale_search::semantic::IndexRecovery`], by name.
fn recovery(r: &shale_search::semantic::IndexRecovery) -> Vec<(&'static str, u64)> {
    let wide = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
    vec![
        ("graph_nodes_reused", wide(r.graph_nodes_reused)),
        ("vectors_reinserted", wide(r.vectors_reinserted)),
        ("texts_to_embed", wide(r.texts_to_embed)),
        ("orphans_deleted", wide(r.orphans_deleted)),
        ("other_model_vectors", wide(r.other_model_vectors)),
        ("open_micros", r.open_micros),
    ]
}
