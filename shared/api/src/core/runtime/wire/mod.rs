//! The Core runtime telemetry answers as the api serializes and documents them. Field for field
//! they are the domain's wire types (`telemetry::observation_wire`, `telemetry::history_wire`),
//! which the admin client parses strictly: every nullable field is present, and a unit test
//! holds the two to the same JSON.

mod history;
mod observations;
#[cfg(test)]
mod tests;

pub use history::*;
pub use observations::*;
