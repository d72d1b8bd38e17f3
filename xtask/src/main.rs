//! `cargo xtask functions` writes functions/src/bin/; `cargo xtask template` writes the generated
//! regions of infra/template.yaml (see the library's docs).

use std::path::Path;
use std::process::ExitCode;

const USAGE: &str = "usage: cargo xtask <command>
  functions   write functions/src/bin/<function>.rs from Route::ALL and Job::ALL
  template    write infra/template.yaml's generated regions (functions, streamed integrations
              and their permissions, one IAM role per set of grants) from Route::ALL and Job::ALL
After adding a route or a job, run both.";

fn main() -> ExitCode {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    match std::env::args().nth(1).as_deref() {
        Some("functions") => match xtask::write_functions(&root) {
            Ok(n) => {
                eprintln!("wrote {n} function binaries in {}", xtask::FUNCTIONS_BIN);
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("writing {}: {err}", xtask::FUNCTIONS_BIN);
                ExitCode::FAILURE
            }
        },
        Some("template") => match xtask::template::write_template(&root) {
            Ok(changed) => {
                let what = if changed { "wrote" } else { "unchanged:" };
                eprintln!("{what} {}", xtask::template::TEMPLATE);
                ExitCode::SUCCESS
            }
            Err(err) => {
                eprintln!("writing {}: {err}", xtask::template::TEMPLATE);
                ExitCode::FAILURE
            }
        },
        _ => {
            eprintln!("{USAGE}");
            ExitCode::from(2)
        }
    }
}
