//! `webhook-reseal`: the job. Written by `cargo xtask functions`; do not edit.

fn main() -> std::process::ExitCode {
    agentplane_functions::jobs::webhook_reseal()
}
