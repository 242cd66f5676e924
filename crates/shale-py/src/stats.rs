//! `DB.stats()`: the engine's counters as a `dict`.

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// Every field of `StatsSnapshot` under its own name. The destructuring lists each field
/// with no `..`, so a counter added to the engine fails to compile here until it is added.
pub(crate) fn to_dict<'py>(
    py: Python<'py>,
    stats: &shale::StatsSnapshot,
) -> PyResult<Bound<'py, PyDict>> {
    macro_rules! fields {
        ($($name:ident),* $(,)?) => {{
            let shale::StatsSnapshot { $($name),* } = stats;
            let dict = PyDict::new(py);
            $(dict.set_item(stringify!($name), *$name)?;)*
            dict
        }};
    }
    Ok(fields!(
        writes,
        write_groups,
        user_bytes_written,
        wal_bytes,
        wal_syncs,
        flushes,
        flush_bytes,
        flush_micros,
        stall_micros,
        stalls,
        slowdown_micros,
        gets,
        bytes_read,
        bloom_useful,
        wal_torn_tail_bytes,
        wal_salvages,
        wal_salvaged_bytes,
        compactions,
        trivial_moves,
        compaction_bytes_read,
        compaction_bytes_written,
        compaction_entries_dropped,
        compaction_micros,
        block_cache_hits,
        block_cache_misses,
        block_cache_rejections,
        block_cache_usage_bytes,
        block_cache_capacity_bytes,
        pinned_table_metadata_bytes,
        open_tables,
        rate_limit_bytes_per_sec,
        rate_limit_wait_micros,
    ))
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
