//! The bench command (`bash tests/bench.sh`): everything runs through the same router the local
//! gateway serves, over real HTTP on loopback, against LocalStack, and prints numbers.
//! `BENCH_N` sets the calls per measured operation (default 300); an argument picks one suite
//! (`sessions`, `turns`, `streaming`, `background`, `files`, `sweep`, `webhooks`), none runs them
//! all.

#![allow(clippy::print_stdout)]

mod background;
mod files;
mod round_trips;
mod sessions;
mod stats;
mod streaming;
mod sweep;
mod turns;
mod webhooks;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::var("BENCH_N").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let only = std::env::args().nth(1);
    let wants = |suite: &str| only.as_deref().is_none_or(|o| o == suite);
    if wants("sessions") {
        sessions::run(n).await?;
        println!();
    }
    if wants("background") {
        Box::pin(background::run(n)).await?;
        println!();
    }
    if wants("files") {
        files::run(n).await?;
        println!();
    }
    if wants("sweep") {
        sweep::run(n).await?;
        println!();
    }
    if wants("turns") {
        Box::pin(turns::run(n)).await?;
        println!();
    }
    if wants("streaming") {
        Box::pin(streaming::run(n)).await?;
        println!();
    }
    if wants("webhooks") {
        Box::pin(webhooks::run(n)).await?;
        println!();
    }
    Ok(())
}
