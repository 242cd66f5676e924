//! A quick single-thread random-load probe (the full suite is `shale-bench`):
//! `cargo run --release -p shale --example fillrandom -- 3000000 [nowal]`.

use std::time::Instant;

use shale::{Db, Options, WriteBatch, WriteOptions};

fn main() -> shale::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let n: u64 = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    let wal = WriteOptions {
        disable_wal: args.get(2).is_some_and(|a| a == "nowal"),
        ..WriteOptions::default()
    };
    let dir = std::env::current_dir()
        .map_err(|e| shale::Error::InvalidArgument(e.to_string()))?
        .join(format!("fillrandom-{}", std::process::id()));
    let db = Db::open(&dir, Options::default())?;
    let mut value = vec![0u8; 100];
    let mut x = 0x2545_f491_4f6c_dd1d_u64;
    let start = Instant::now();
    for i in 0..n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = format!("{:016}", x % (n * 10));
        value[..8].copy_from_slice(&i.to_le_bytes());
        let mut b = WriteBatch::new();
        b.put(key.as_bytes(), &value);
        db.write(b, wal)?;
    }
    let secs = start.elapsed().as_secs_f64();
    println!(
        "{n} random puts in {secs:.2} s: {:.0} ops/s",
        n as f64 / secs
    );
    println!("{:?}", db.stats());
    drop(db);
    std::fs::remove_dir_all(&dir).map_err(|e| shale::Error::InvalidArgument(e.to_string()))?;
    Ok(())
}
