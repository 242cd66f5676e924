//! The memtable: an in-memory sorted map of internal keys (to be written).
