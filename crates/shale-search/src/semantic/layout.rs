//! Where an index lives: `indexes/<name>/` of its database's directory (module
//! documentation of `semantic` lists the files in it).

use std::path::{Path, PathBuf};

use shale::inspect::filename::INDEXES_DIR;

/// The directory of index `name` in the database directory `db_dir`.
pub fn index_dir(db_dir: &Path, name: &str) -> PathBuf {
    db_dir.join(INDEXES_DIR).join(name)
}
