//! SSTables: sorted, immutable, checksummed files of internal keys (to be written).
