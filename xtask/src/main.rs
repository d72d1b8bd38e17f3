//! `cargo xtask functions`: writes functions/src/bin/ (see the library's docs).

use std::path::Path;
use std::process::ExitCode;

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
        _ => {
            eprintln!("usage: cargo xtask functions");
            ExitCode::from(2)
        }
    }
}
