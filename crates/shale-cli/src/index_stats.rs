//! `index-stats`: what the semantic index the command opens is (`index.rs`), its counters,
//! and what its open found, as text or JSON.

use std::io::Write;

use crate::args::Cli;
use crate::error::{CliError, Result};
use crate::escape::{escape, json_bytes};
use crate::index::OpenIndex;

/// `index-stats`: what the index is, its counters, and what its open found.
pub fn run(cli: &Cli, out: &mut impl Write, json: bool) -> Result<()> {
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
    r: &shale_search::semantic::VectorIndexRecovery,
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

/// Every counter of [`shale_search::semantic::VectorIndexStats`], by name.
fn counters(s: &shale_search::semantic::VectorIndexStats) -> Vec<(&'static str, u64)> {
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

/// The counts of [`shale_search::semantic::VectorIndexRecovery`], by name.
fn recovery(r: &shale_search::semantic::VectorIndexRecovery) -> Vec<(&'static str, u64)> {
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
