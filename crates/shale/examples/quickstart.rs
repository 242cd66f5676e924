//! Write a database, close it, reopen it and read it back.
//!
//! Run with `cargo run --release -p shale --example quickstart`.

use std::time::Instant;

use shale::{Db, Options, WriteBatch, WriteOptions};

fn main() -> shale::Result<()> {
    let dir = std::env::temp_dir().join(format!("shale-quickstart-{}", std::process::id()));
    let n: u64 = 200_000;

    let db = Db::open(&dir, Options::default())?;
    let start = Instant::now();
    for i in 0..n {
        db.put(
            format!("user:{i:08}"),
            format!("{{\"id\":{i},\"name\":\"user {i}\"}}"),
        )?;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "put {n} keys in {secs:.2} s ({:.0} puts/s)",
        n as f64 / secs
    );

    // An atomic batch, made durable before it returns.
    let mut batch = WriteBatch::new();
    batch.put("config:mode", "demo");
    batch.delete("user:00000000");
    db.write(batch, WriteOptions::sync())?;
    db.close()?;
    drop(db);

    let db = Db::open(&dir, Options::default())?;
    let start = Instant::now();
    let mut found = 0;
    for i in 0..n {
        if db.get(format!("user:{i:08}"))?.is_some() {
            found += 1;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "after reopen: {found} of {n} keys found in {secs:.2} s ({:.0} gets/s)",
        n as f64 / secs
    );
    println!(
        "config:mode = {:?}",
        db.get("config:mode")?.map(String::from_utf8)
    );
    println!(
        "user:00000000 = {:?} (deleted in the batch)",
        db.get("user:00000000")?
    );
    println!(
        "user:00000042 = {:?}",
        db.get("user:00000042")?.map(String::from_utf8)
    );
    let stats = db.stats();
    println!(
        "files per level: {:?}; stats: {stats:?}",
        db.level_file_counts()
    );
    drop(db);
    std::fs::remove_dir_all(&dir).map_err(|e| shale::Error::InvalidArgument(e.to_string()))?;
    Ok(())
}
