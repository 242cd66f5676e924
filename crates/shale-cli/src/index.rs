//! Which semantic index a command opens.
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

use std::sync::Arc;
use std::time::{Duration, Instant};

use shale_search::semantic::{
    Embedder, VectorIndex, VectorIndexDefinition, VectorIndexOptions, USER_VECTORS,
};
use shale_search::vector::Metric;

use crate::args::Cli;
use crate::embedder::{self, EmbedderKind};
use crate::error::{CliError, Result};

/// An open index and the model it embeds with.
pub struct OpenIndex {
    pub index: VectorIndex,
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
    let recorded = VectorIndex::definition(db, name).ok().flatten();
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
        Some(model) => VectorIndexOptions::text(model),
        None => VectorIndexOptions::vectors(dim),
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
    let index = VectorIndex::open(db, name, opts)?;
    Ok(OpenIndex { index, model_id })
}

/// Refuse options under which the index could hold none of what it holds.
fn check_record(
    name: &str,
    recorded: &VectorIndexDefinition,
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
pub fn wait_indexed(index: &VectorIndex) -> Result<()> {
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
