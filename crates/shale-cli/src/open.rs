//! Opening the database a command names (`--db`): plain, through the TTL layer, or with
//! its semantic index (`index.rs`) and every text index it has.

use crate::args::Cli;
use crate::error::{CliError, Result};
use crate::index;

impl Cli {
    /// True if `--db` holds a TTL database (its `TTL` file).
    pub fn is_ttl(&self) -> bool {
        self.db
            .as_deref()
            .is_some_and(|dir| dir.join(shale::ttl::TTL_MARKER).exists())
    }

    /// The database through the TTL layer if it is a TTL one (or if `create_ttl`, which
    /// makes a new database one); `None` for a plain database.
    pub fn open_ttl(&self, create_ttl: bool) -> Result<Option<shale::TtlDb>> {
        if !create_ttl && !self.is_ttl() {
            return Ok(None);
        }
        if self.keyspace.is_some() {
            return Err(CliError::Usage(
                "a TTL database's expiring values live in its default keyspace: \
                 --keyspace does not apply"
                    .into(),
            ));
        }
        if self.semantic || self.index_args.index.is_some() {
            return Err(CliError::Usage(
                "a TTL database has no semantic index".into(),
            ));
        }
        let opts = shale::Options {
            create_if_missing: create_ttl,
            read_only: self.read_only,
            ..shale::Options::default()
        };
        Ok(Some(shale::TtlDb::open(self.db_dir()?, opts)?))
    }

    /// Open the database, and its semantic index (`--index`, see `index.rs`) when
    /// `semantic`, `--semantic` or `--index`. Only commands that write may create it, so a
    /// mistyped `--db` on a read is an error, not a new empty database.
    pub fn open(&self, create: bool, semantic: bool) -> Result<Opened> {
        let dir = self.db_dir()?;
        if self.is_ttl() && !self.ttl_agnostic() {
            // Its values carry their expiry: only the TTL layer reads and writes them.
            return Err(CliError::Usage(format!(
                "{} is a TTL database: this command works on plain databases only \
                 (put, get, del, del-range, scan, flush, compact, stats, checkpoint and \
                 verify work on both)",
                dir.display()
            )));
        }
        let opts = shale::Options {
            create_if_missing: create,
            read_only: self.read_only,
            ..shale::Options::default()
        };
        let db = std::sync::Arc::new(shale::Db::open(dir, opts)?);
        let mut text = Vec::new();
        if !self.read_only {
            for name in shale_search::TextIndex::names(&db) {
                text.extend(shale_search::TextIndex::open_existing(&db, &name)?);
            }
        }
        let index = if semantic || self.semantic || self.index_args.index.is_some() {
            Some(index::open(self, &db)?)
        } else {
            None
        };
        Ok(Opened { db, index, text })
    }
}

/// An open database, its index when the command asked for one, and every text index it
/// has (opened so that the command's writes keep them exact).
pub struct Opened {
    pub db: std::sync::Arc<shale::Db>,
    pub index: Option<index::OpenIndex>,
    pub text: Vec<shale_search::TextIndex>,
}

impl std::ops::Deref for Opened {
    type Target = shale::Db;
    fn deref(&self) -> &shale::Db {
        &self.db
    }
}

impl Opened {
    /// The index the command opened.
    pub fn index(&self) -> Result<&shale_search::semantic::VectorIndex> {
        Ok(&self.index_handle()?.index)
    }

    /// The database, shared (a text index holds it).
    pub fn db(&self) -> &std::sync::Arc<shale::Db> {
        &self.db
    }

    /// The text index `name`.
    pub fn text_index(&self, name: &str) -> Result<&shale_search::TextIndex> {
        self.text.iter().find(|t| t.name() == name).ok_or_else(|| {
            CliError::Usage(format!(
                "no text index {name:?} (define-text-index makes one; a read-only open has none)"
            ))
        })
    }

    /// The index the command opened, and its model.
    pub fn index_handle(&self) -> Result<&index::OpenIndex> {
        self.index
            .as_ref()
            .ok_or_else(|| CliError::Usage("this command needs the semantic index".into()))
    }
}
