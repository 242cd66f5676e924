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
        block_cache_usage_bytes,
        block_cache_capacity_bytes,
        pinned_table_metadata_bytes,
        open_tables,
        rate_limit_bytes_per_sec,
        rate_limit_wait_micros,
    ))
}
