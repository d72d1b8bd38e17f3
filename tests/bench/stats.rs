//! Percentiles and a measuring loop shared by every bench.

use std::time::{Duration, Instant};

pub struct Stats {
    pub p50: Duration,
    pub p99: Duration,
}

pub fn stats(mut samples: Vec<Duration>) -> Stats {
    samples.sort();
    if samples.is_empty() {
        return Stats { p50: Duration::ZERO, p99: Duration::ZERO };
    }
    let at = |q: f64| samples[((samples.len() as f64 - 1.0) * q).round() as usize];
    Stats { p50: at(0.50), p99: at(0.99) }
}

/// Runs `op` a few times to warm up, then `n` times measured.
pub async fn measure<F, Fut>(n: usize, mut op: F) -> anyhow::Result<Stats>
where
    F: FnMut(usize) -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    for i in 0..n.min(20) {
        op(i).await?;
    }
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        let start = Instant::now();
        op(i).await?;
        samples.push(start.elapsed());
    }
    Ok(stats(samples))
}

pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
