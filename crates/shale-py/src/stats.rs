//! `DB.stats()`: the engine's counters as a `dict`.

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Every counter of `StatsSnapshot` under its own name (`StatsSnapshot::counters`).
pub(crate) fn to_dict<'py>(
    py: Python<'py>,
    stats: &shale::StatsSnapshot,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (name, value) in stats.counters() {
        dict.set_item(name, value)?;
    }
    Ok(dict)
}

/// `shale.repair()`'s report: every field of `RepairReport` under its own name (the file
/// lists as `str` paths, each problem as a `dict`, each index's vector store's report
/// nested under its name in `indexes`). Destructured without `..` like [`to_dict`].
pub(crate) fn repair_to_dict<'py>(
    py: Python<'py>,
    report: &shale::RepairReport,
) -> PyResult<Bound<'py, PyDict>> {
    let shale::RepairReport {
        manifest_used,
        tables_read,
        tables_unreadable,
        blocks_dropped,
        wal_batches,
        wal_bytes_dropped,
        entries_read,
        entries_written,
        tables_written,
        moved_to_lost,
        problems,
        indexes,
    } = report;
    let dict = PyDict::new(py);
    dict.set_item("manifest_used", *manifest_used)?;
    for (name, value) in [
        ("tables_read", tables_read),
        ("tables_unreadable", tables_unreadable),
        ("blocks_dropped", blocks_dropped),
        ("wal_batches", wal_batches),
        ("wal_bytes_dropped", wal_bytes_dropped),
        ("entries_read", entries_read),
        ("entries_written", entries_written),
        ("tables_written", tables_written),
    ] {
        dict.set_item(name, *value)?;
    }
    let lost: Vec<String> = moved_to_lost
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    dict.set_item("moved_to_lost", lost)?;
    let mut damage = Vec::with_capacity(problems.len());
    for p in problems {
        let item = PyDict::new(py);
        item.set_item("file", p.file.display().to_string())?;
        item.set_item("offset", p.offset)?;
        item.set_item("reason", &p.reason)?;
        damage.push(item);
    }
    dict.set_item("problems", damage)?;
    let nested = PyDict::new(py);
    for (name, index) in indexes {
        nested.set_item(name, repair_to_dict(py, index)?)?;
    }
    dict.set_item("indexes", nested)?;
    Ok(dict)
}

/// `VectorIndex.stats()`: every field of `VectorIndexStats` under its own name, and the index's
/// progress since open as `applied_since_open` / `queued_since_open`. (`VectorIndexStats` is
/// `#[non_exhaustive]`, so a field added to the engine cannot fail this build: the Python
/// test of `stats()` lists the names.)
pub(crate) fn index_stats_to_dict<'py>(
    py: Python<'py>,
    stats: &shale_search::semantic::VectorIndexStats,
    (applied, queued): (u64, u64),
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("live", stats.live)?;
    for (name, value) in [
        ("queued", stats.queued),
        ("queued_bytes", stats.queued_bytes),
        ("stalls", stats.stalls),
        ("stall_micros", stats.stall_micros),
        ("checkpoints", stats.checkpoints),
        ("last_checkpoint_micros", stats.last_checkpoint_micros),
        ("graph_bytes", stats.graph_bytes),
        ("id_space", stats.id_space),
        ("tracked_keys", stats.tracked_keys),
        ("applied_since_open", applied),
        ("queued_since_open", queued),
    ] {
        dict.set_item(name, value)?;
    }
    Ok(dict)
}

/// `VectorIndex.recovery()`: every field of `VectorIndexRecovery` under its own name
/// (`store_damage` is `None` or the damage found, as text).
pub(crate) fn index_recovery_to_dict<'py>(
    py: Python<'py>,
    recovery: &shale_search::semantic::VectorIndexRecovery,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    for (name, value) in [
        ("graph_nodes_reused", recovery.graph_nodes_reused),
        ("vectors_reinserted", recovery.vectors_reinserted),
        ("texts_to_embed", recovery.texts_to_embed),
        ("orphans_deleted", recovery.orphans_deleted),
        ("other_model_vectors", recovery.other_model_vectors),
    ] {
        dict.set_item(name, value)?;
    }
    dict.set_item("graph_damaged", recovery.graph_damaged)?;
    dict.set_item("store_damage", recovery.store_damage.as_deref())?;
    dict.set_item("open_micros", recovery.open_micros)?;
    Ok(dict)
}
