//! The commands that look after a database as a whole: keyspaces, drop-keyspace,
//! define-index, flush, compact and checkpoint. Each opens the database, makes one library
//! call and closes it.

use std::io::Write;
use std::path::Path;

use crate::args::Cli;
use crate::error::{CliError, Result};
use crate::kv::Space;

/// `keyspaces`: the name of every keyspace, one per line.
pub fn keyspaces(cli: &Cli, out: &mut impl Write) -> Result<()> {
    let db = cli.open(false, false)?;
    for name in db.keyspace_names() {
        writeln!(out, "{name}").map_err(CliError::Stdout)?;
    }
    Ok(db.close()?)
}

/// `drop-keyspace NAME`.
pub fn drop_keyspace(cli: &Cli, name: &str) -> Result<()> {
    let db = cli.open(false, false)?;
    db.drop_keyspace(name)?;
    Ok(db.close()?)
}

/// `define-index`: opening the index as the options describe it makes it, or checks it.
pub fn define_index(cli: &Cli) -> Result<()> {
    let db = cli.open(true, true)?;
    Ok(db.close()?)
}

/// `flush`: the memtable to an SSTable.
pub fn flush(cli: &Cli) -> Result<()> {
    let db = cli.open(false, false)?;
    db.flush()?;
    Ok(db.close()?)
}

/// `compact`: the whole key range of the keyspace down the levels.
pub fn compact(cli: &Cli) -> Result<()> {
    match cli.open_ttl(false)? {
        // The expiry filter runs only when the TTL layer opened the database.
        Some(ttl) => {
            ttl.db().compact_range(None, None)?;
            Ok(ttl.close()?)
        }
        None => {
            let db = cli.open(false, false)?;
            Space::open(cli, &db, false)?.compact_range(None, None)?;
            Ok(db.close()?)
        }
    }
}

/// `checkpoint DIR`: an openable copy of the database as of now.
pub fn checkpoint(cli: &Cli, dir: &Path) -> Result<()> {
    let db = cli.open(false, false)?;
    db.checkpoint(dir)?;
    Ok(db.close()?)
}
