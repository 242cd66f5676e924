//! `fdatasync(2)` with its failure as Shale's `Error`: the one durability call that both the
//! buffered writer (`posix.rs`) and the WAL's append region (`append_region.rs`) end with.

use std::fs::File;
use std::path::Path;

use crate::error::{Error, Result};

/// Makes `file`'s data (and the metadata needed to read it back) durable; `path` names the
/// file in the error.
///
/// # Errors
/// [`Error::Io`] when the system call fails.
pub(super) fn fdatasync(file: &File, path: &Path) -> Result<()> {
    file.sync_data()
        .map_err(|e| Error::io("fdatasync", path, e))
}
