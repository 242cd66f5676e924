//! What machine, commit and time a result came from.

use std::process::Command;

/// "N cores, CPU model, M GiB RAM" from /proc.
pub fn describe() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown CPU", str::trim)
        .to_string();
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem_kib: u64 = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0);
    format!(
        "{cores} cores (nproc), {model}, {:.1} GiB RAM",
        mem_kib as f64 / (1 << 20) as f64
    )
}

fn run(cmd: &str, args: &[&str]) -> String {
    Command::new(cmd)
        .args(args)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into())
}

/// The commit this binary was built from (`build.rs`), and the checkout's HEAD now if
/// that has moved on since (the binary is older than the source next to it).
pub fn git_commit() -> String {
    let built = env!("SHALE_BENCH_BUILT_FROM");
    let head = run(
        "git",
        &[
            "-C",
            env!("CARGO_MANIFEST_DIR"),
            "rev-parse",
            "--short=12",
            "HEAD",
        ],
    );
    if head != "unknown" && !built.starts_with(head.as_str()) {
        format!("{built} (HEAD is now {head})")
    } else {
        built.to_string()
    }
}

/// UTC now, as `date -u` prints it in ISO form.
pub fn date() -> String {
    run("date", &["-u", "+%Y-%m-%dT%H:%M:%SZ"])
}
