//! What a long randomized trial needs around it: panics counted in every thread
//! (background threads included, so a trial that catches its own panic still fails if any
//! thread panicked), a process of its own to count them in, a child process to kill in the
//! middle of its work, and counts from the environment.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Once;

static PANICS: AtomicU64 = AtomicU64::new(0);
static HOOK: Once = Once::new();

/// Count panics in every thread from now on.
pub fn count_panics() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::Relaxed);
            previous(info);
        }));
    });
}

/// Panics counted so far.
pub fn panics() -> u64 {
    PANICS.load(Ordering::Relaxed)
}

/// A command that runs test `test` of the module `module` (the caller's `module_path!()`)
/// alone in a new process of the same test binary, its output not captured: for a test
/// that kills a child in the middle of its writes, or one that needs a process of its own.
/// A child whose name matches no test runs nothing and passes, so the caller checks that
/// it did its work.
pub fn test_in_child(module: &str, test: &str) -> std::process::Command {
    // libtest names a test by its path without the crate's name.
    let name = match module.split_once("::") {
        Some((_, path)) => format!("{path}::{test}"),
        None => test.to_string(),
    };
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut command = std::process::Command::new(exe);
    command.args(["--exact", &name, "--nocapture", "--test-threads=1"]);
    command
}

/// A test running in a child process ([`test_in_child`]) that tells the parent on its
/// standard output how far it got, one line per step, until the parent kills it. Dropped, it
/// kills the child, so a failing parent leaves no process behind.
pub struct TestChild {
    process: std::process::Child,
    lines: std::io::Lines<std::io::BufReader<std::process::ChildStdout>>,
}

impl TestChild {
    /// Start `command` (from [`test_in_child`]) with its standard output piped to the parent.
    pub fn spawn(command: &mut std::process::Command) -> TestChild {
        use std::io::BufRead;
        let mut process = command
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("starting the test binary again");
        let stdout = process.stdout.take().expect("the child's piped stdout");
        TestChild {
            process,
            lines: std::io::BufReader::new(stdout).lines(),
        }
    }

    /// Read the child's lines until `step` returns `Some` for one, and return that; `None`
    /// where the child's output ended first (it exited or failed).
    pub fn read_until<T>(&mut self, mut step: impl FnMut(&str) -> Option<T>) -> Option<T> {
        self.lines
            .by_ref()
            .map_while(Result::ok)
            .find_map(|line| step(&line))
    }

    /// Read the child's lines until one ends in `mark` (the test harness may print its own
    /// words before the child's on the first line); panic where the output ended first.
    pub fn wait_for(&mut self, mark: &str) {
        let found = self.read_until(|line| line.trim_end().ends_with(mark).then_some(()));
        assert!(
            found.is_some(),
            "the child ended before it printed {mark:?}"
        );
    }

    /// Kill the child with SIGKILL (no destructor, no close, nothing flushed) and reap it.
    pub fn kill(mut self) {
        self.stop();
    }

    fn stop(&mut self) {
        // An error here is a child that has already exited: reaping it is all that is left.
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

impl Drop for TestChild {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Run the calling test alone in a child process of its test binary, and return `true`
/// there, where the test goes on; in the parent, wait for the child, fail with its output
/// unless it passed, and return `false`. For a trial that counts every panic of its
/// process ([`count_panics`]): the other tests of the binary run in the same process, and
/// a panic of theirs would count against it.
///
/// `module` is the caller's `module_path!()`, `test` its function's name.
pub fn in_own_process(module: &str, test: &str) -> bool {
    const CHILD: &str = "SHALE_TRIAL_IN_OWN_PROCESS";
    if std::env::var_os(CHILD).is_some() {
        return true;
    }
    let out = test_in_child(module, test)
        .env(CHILD, "1")
        .output()
        .expect("starting the test binary again");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    // Shown by the harness when this test fails, or with --nocapture.
    print!("{stdout}");
    eprint!("{stderr}");
    assert!(
        out.status.success(),
        "{test} failed in its own process ({})",
        out.status
    );
    assert!(
        stdout.contains("test result: ok. 1 passed"),
        "{test} did not run in its own process: no test of that name in {module}"
    );
    false
}

/// A count from the environment, or `default` (CI mode).
pub fn env_count(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|&n| n > 0)
        .unwrap_or(default)
}

#[cfg(test)]
mod tests {
    use super::in_own_process;

    #[test]
    fn a_test_runs_again_in_a_process_of_its_own() {
        let child = std::env::var_os("SHALE_TRIAL_IN_OWN_PROCESS").is_some();
        // The parent returns false once the child, which returns true, has passed.
        assert_eq!(
            in_own_process(module_path!(), "a_test_runs_again_in_a_process_of_its_own"),
            child
        );
    }

    #[test]
    #[should_panic(expected = "did not run in its own process")]
    fn a_name_that_matches_no_test_fails() {
        in_own_process(module_path!(), "no_such_test");
    }
}
