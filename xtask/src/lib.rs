//! What is generated from the code, and kept in step by `cargo xtask functions` and
//! `cargo xtask template` (tests/infra.rs fails when a checked-in file differs from what this
//! writes).
//!
//! - `functions/src/bin/<function>.rs`: one binary per route (its declaration, taken at compile
//!   time) and per job, so each links only its own handler or job.
//! - infra/template.yaml's generated regions ([`template`]): every function, the streamed
//!   routes' integrations and permissions, and one IAM role per distinct set of grants.

pub mod template;

use std::path::Path;

use agentplane_api::jobs::Job;
use agentplane_api::routes::Route;

/// The directory of the function binaries, under the workspace root.
pub const FUNCTIONS_BIN: &str = "functions/src/bin";

/// Every function binary's file name and source.
pub fn function_sources() -> Vec<(String, String)> {
    let mut out = Vec::new();
    for route in Route::ALL {
        let name = route.function_name();
        let source = format!(
            "//! `{name}`: {} {}. Written by `cargo xtask functions`; do not edit.\n\n\
             agentplane_functions::route_function!({route:?});\n",
            route.method(),
            route.path()
        );
        out.push((format!("{name}.rs"), source));
    }
    for job in Job::ALL {
        let name = job.function_name();
        let source = format!(
            "//! `{name}`: the job. Written by `cargo xtask functions`; do not edit.\n\n\
             fn main() -> std::process::ExitCode {{\n    \
             agentplane_functions::jobs::{}()\n}}\n",
            name.replace('-', "_")
        );
        out.push((format!("{name}.rs"), source));
    }
    out
}

/// Writes the function binaries under `root` and removes any other file there.
pub fn write_functions(root: &Path) -> std::io::Result<usize> {
    let dir = root.join(FUNCTIONS_BIN);
    std::fs::create_dir_all(&dir)?;
    let sources = function_sources();
    for entry in std::fs::read_dir(&dir)? {
        let entry = entry?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !sources.iter().any(|(file, _)| *file == name) {
            std::fs::remove_file(entry.path())?;
        }
    }
    for (file, source) in &sources {
        let path = dir.join(file);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(source.as_str()) {
            std::fs::write(path, source)?;
        }
    }
    Ok(sources.len())
}
