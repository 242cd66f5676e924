//! The network of a `--netns` run: a bridge, and per node a network namespace joined to
//! it by a veth pair (10.77.0.0/24), made and removed with ip(8); a one-way partition as
//! a zero-length queue on one end of a pair, with tc(8).

use std::process::Command;

const BRIDGE: &str = "shale-br0";

pub(crate) fn ns_name(id: u64) -> String {
    format!("shale-chaos-{id}")
}

pub(crate) fn host_link(id: u64) -> String {
    format!("shale-h{id}")
}

/// The node's end of its veth pair, inside its namespace.
pub(crate) fn node_link(id: u64) -> String {
    format!("shale-n{id}")
}

/// Run `tool` with `args`; its error output if it fails.
fn run_tool(tool: &str, args: &[&str]) -> Result<(), String> {
    let out = Command::new(tool)
        .args(args)
        .output()
        .map_err(|e| format!("{tool} {}: {e}", args.join(" ")))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{tool} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Run `ip` with `args`.
pub(crate) fn ip(args: &[&str]) -> Result<(), String> {
    run_tool("ip", args)
}

/// Remove the namespaces and the bridge, whatever is left of them.
pub(crate) fn netns_down() {
    for id in 1..=3u64 {
        let _ = ip(&["netns", "del", &ns_name(id)]);
        let _ = ip(&["link", "del", &host_link(id)]);
    }
    let _ = ip(&["link", "del", BRIDGE]);
}

/// Drop (`on`) or pass again every packet sent out of `dev` (in namespace `ns`): a queue
/// of length 0 as its root queueing discipline. tc's filters and netem need kernel
/// modules a container may lack; `pfifo` does not.
pub(crate) fn one_way(ns: Option<&str>, dev: &str, on: bool) -> Result<(), String> {
    let mut args: Vec<&str> = Vec::new();
    if let Some(ns) = ns {
        args.extend(["-n", ns]);
    }
    if on {
        args.extend(["qdisc", "add", "dev", dev, "root", "pfifo", "limit", "0"]);
    } else {
        args.extend(["qdisc", "del", "dev", dev, "root"]);
    }
    run_tool("tc", &args)
}

/// A bridge at 10.77.0.1 and, per node, a namespace whose end of a veth pair is
/// 10.77.0.(10 + id).
pub(crate) fn netns_up() -> Result<(), String> {
    netns_down();
    ip(&["link", "add", BRIDGE, "type", "bridge"])?;
    ip(&["addr", "add", "10.77.0.1/24", "dev", BRIDGE])?;
    ip(&["link", "set", BRIDGE, "up"])?;
    for id in 1..=3u64 {
        let ns = ns_name(id);
        let host = host_link(id);
        let inner = node_link(id);
        let addr = format!("10.77.0.{}/24", 10 + id);
        ip(&["netns", "add", &ns])?;
        ip(&["link", "add", &host, "type", "veth", "peer", "name", &inner])?;
        ip(&["link", "set", &inner, "netns", &ns])?;
        ip(&["link", "set", &host, "master", BRIDGE])?;
        ip(&["link", "set", &host, "up"])?;
        ip(&["-n", &ns, "addr", "add", &addr, "dev", &inner])?;
        ip(&["-n", &ns, "link", "set", &inner, "up"])?;
        ip(&["-n", &ns, "link", "set", "lo", "up"])?;
    }
    Ok(())
}
