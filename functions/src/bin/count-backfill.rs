//! `count-backfill`: the job. Written by `cargo xtask functions`; do not edit.

fn main() -> std::process::ExitCode {
    agentplane_functions::jobs::count_backfill()
}
