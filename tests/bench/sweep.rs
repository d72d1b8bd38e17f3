//! The retention sweep over 10,000 expired session files (1,000 sessions of 10; their items
//! written through the store, each with its count; the objects are not uploaded, and S3's
//! delete of a missing key costs the same round trip): the passes it takes (a pass reads at most
//! 10 pages of 100) and their times, and the files deleted per second.

use std::time::Instant;

use agentplane_domain::file::{FileId, FileStatus, SessionFile};
use agentplane_domain::{ProjectId, SessionId, Timestamp};
use agentplane_tests::TestApp;

use crate::stats::{ms, stats};

const SESSIONS: usize = 1_000;
const PER_SESSION: usize = 10;

fn random<const N: usize>() -> [u8; N] {
    let mut buf = [0u8; N];
    let _ = getrandom::fill(&mut buf);
    buf
}

pub async fn run(_n: usize) -> anyhow::Result<()> {
    let app = TestApp::spawn().await?;
    let project = ProjectId::from_random(random());
    let expired = Timestamp::from_unix_seconds(1_000_000);
    let start = Instant::now();
    let mut writes = Vec::new();
    for _ in 0..SESSIONS {
        let session = SessionId::from_random(random());
        for i in 0..PER_SESSION {
            let file = SessionFile {
                id: FileId::from_random(random()),
                project_id: project,
                session_id: session,
                filename: format!("f{i}.txt"),
                content_type: "text/plain".into(),
                size: 5,
                status: FileStatus::Ready,
                created_at: expired,
                expires_at: expired,
                bucket: None,
            };
            let store = app.store.clone();
            writes.push(tokio::spawn(async move { store.files().create(&file, 10).await }));
            if writes.len() >= 32 {
                for w in writes.drain(..) {
                    w.await??;
                }
            }
        }
    }
    for w in writes.drain(..) {
        w.await??;
    }
    println!(
        "retention sweep: {} expired files written in {:.1} s",
        SESSIONS * PER_SESSION,
        start.elapsed().as_secs_f64()
    );
    let now = agentplane_engine::now();
    let mut passes = Vec::new();
    let mut deleted = 0;
    let total = Instant::now();
    loop {
        let t = Instant::now();
        let report = agentplane_api::jobs::sweep_once(&app.store, now).await?;
        passes.push(t.elapsed());
        deleted += report.files_deleted;
        if report.files_deleted == 0 {
            break;
        }
    }
    let secs = total.elapsed().as_secs_f64();
    let count = passes.len();
    let max = passes.iter().max().copied().unwrap_or_default();
    let s = stats(passes);
    println!(
        "retention sweep: {deleted} files deleted in {count} passes (the last found none), {secs:.1} s, {:.0} files/s; a pass p50 {:.0} ms, max {:.0} ms",
        deleted as f64 / secs,
        ms(s.p50),
        ms(max),
    );
    Ok(())
}
