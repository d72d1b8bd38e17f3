//! The integration suite: every file of `tests/` is one module of this one test binary, so the
//! AWS SDK and the whole router are linked once, not once per file. Each module reads on its own
//! (its own imports and helpers); the harness in `common/` is the `agentplane_tests` library.
//! One file's tests: `cargo test -p agentplane-tests --test suite -- <module>::`.

mod a2a;
mod actions;
mod agents;
mod attack_deep_trees;
mod attack_runtime_observations;
mod attack_sandbox_disk;
mod attack_sandbox_pids;
mod attack_secret_files;
mod attack_stream_caps;
mod attack_webhook_ssrf;
mod attack_wire;
mod background;
mod buckets;
mod budgets;
mod cancel;
mod client_wire;
mod contract;
mod core_corrections;
mod core_node_wire;
mod corrections;
mod deployed;
mod edge;
mod events;
mod experience;
mod feedback;
mod files;
mod foundation;
mod infra;
mod jobs;
mod managed_compute;
mod node_reads;
mod pauses;
mod platform;
mod platform_exec;
mod platform_files;
mod platform_runs;
mod retention;
mod rewind;
mod round_trips;
mod sandbox_escape;
mod sandbox_surface;
mod sandboxes;
mod seed_session_purge;
mod seed_tenant_resume;
mod seed_title_spend;
mod sessions;
mod telemetry;
mod tenants;
mod titles;
mod transcripts;
mod turns;
mod webhook_delivery;
mod webhooks;
