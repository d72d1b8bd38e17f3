use super::*;

fn new(model: &str, input: &str, files: Vec<(&str, Option<&str>)>) -> Result<NewRun, ValidationError> {
    let files = files.into_iter().map(|(p, s)| (p.to_owned(), s.map(str::to_owned))).collect();
    NewRun::new(model, input, files, false)
}

#[test]
fn requests_are_validated_naming_the_field() {
    assert!(new("gpt-test", "fix it", vec![("/workspace/a.rs", None)]).is_ok());
    assert_eq!(new("", "x", vec![]).unwrap_err().param.as_deref(), Some("model"));
    assert_eq!(new("m", "  ", vec![]).unwrap_err().param.as_deref(), Some("input"));
    assert_eq!(
        new("m", "x", vec![("/workspace/../a", None)]).unwrap_err().param.as_deref(),
        Some("files[0].path")
    );
    assert_eq!(
        new("m", "x", vec![("/workspace/a", None), ("/workspace/b", Some("ABC"))])
            .unwrap_err()
            .param
            .as_deref(),
        Some("files[1].sha256")
    );
    assert!(new("m", "x", vec![("/workspace/a", Some(&"a".repeat(64)))]).is_ok());
}

#[test]
fn stop_depends_on_the_status() {
    let mut run = new("m", "x", vec![]).unwrap_or_else(|e| panic!("{e}")).into_run(
        RunId::from_random([1; 16]),
        ProjectId::from_random([2; 16]),
        EnvironmentId::from_random([3; 16]),
        SessionId::from_random([4; 16]),
        1,
        Timestamp::from_unix_millis(0),
    );
    assert_eq!(stop_effect(&run), StopEffect::StopNow);
    run.status = RunStatus::Running;
    assert_eq!(stop_effect(&run), StopEffect::Request);
    run.stop_requested = true;
    assert_eq!(stop_effect(&run), StopEffect::Nothing);
    run.status = RunStatus::Completed;
    assert_eq!(stop_effect(&run), StopEffect::Nothing);
    run.status = RunStatus::Reverted;
    assert_eq!(stop_effect(&run), StopEffect::Refused);
}

#[test]
fn a_failed_rollback_gives_each_run_back() {
    let base = new("m", "x", vec![]).unwrap_or_else(|e| panic!("{e}")).into_run(
        RunId::from_random([1; 16]),
        ProjectId::from_random([2; 16]),
        EnvironmentId::from_random([3; 16]),
        SessionId::from_random([4; 16]),
        1,
        Timestamp::from_unix_millis(0),
    );
    let at = Timestamp::from_unix_millis(9);
    // An ended Run reads as it did.
    let mut done = base.clone();
    done.status = RunStatus::Completed;
    done.checkpoint.status = CheckpointStatus::Ready;
    done.file_diff_status = DiffStatus::Ready;
    begin_revert(&mut done);
    assert_eq!((done.status, done.reverted_from), (RunStatus::Reverting, Some(RunStatus::Completed)));
    begin_revert(&mut done);
    assert_eq!(done.reverted_from, Some(RunStatus::Completed), "a second mark keeps the first status");
    unrevert(&mut done, at);
    assert_eq!((done.status, done.checkpoint.status), (RunStatus::Completed, CheckpointStatus::Ready));
    assert_eq!(done.reverted_from, None);
    // A queued one never ran: stopped, nothing to diff.
    let mut queued = base.clone();
    begin_revert(&mut queued);
    unrevert(&mut queued, at);
    assert_eq!(queued.status, RunStatus::Stopped);
    assert_eq!(
        (queued.checkpoint.status, queued.file_diff_status),
        (CheckpointStatus::Skipped, DiffStatus::Ready)
    );
    assert_eq!(queued.finished_at, Some(at));
    // A running one: stopped, its diff unknown (never `ready` with nothing in it).
    let mut running = base;
    running.status = RunStatus::Running;
    running.started_at = Some(at);
    begin_revert(&mut running);
    unrevert(&mut running, at);
    assert_eq!(running.status, RunStatus::Stopped);
    assert_eq!(
        (running.checkpoint.status, running.file_diff_status),
        (CheckpointStatus::Failed, DiffStatus::Failed)
    );
    assert!(running.file_diff_error.is_some());
}

#[test]
fn the_latest_manifest_skips_what_was_rolled_back() {
    let run = |status: RunStatus, start: Option<&str>, end: Option<&str>| {
        let mut run = new("m", "x", vec![]).unwrap_or_else(|e| panic!("{e}")).into_run(
            RunId::from_random([1; 16]),
            ProjectId::from_random([2; 16]),
            EnvironmentId::from_random([3; 16]),
            SessionId::from_random([4; 16]),
            1,
            Timestamp::from_unix_millis(0),
        );
        run.status = status;
        run.start_manifest = start.map(str::to_owned);
        if let Some(end) = end {
            run.checkpoint.status = CheckpointStatus::Ready;
            run.checkpoint.snapshot_id = Some(end.to_owned());
        }
        run
    };
    let done = run(RunStatus::Completed, Some("s1"), Some("e1"));
    assert_eq!(latest_manifest([&done]).as_deref(), Some("e1"));
    // A failed end checkpoint: its start is the best known.
    let failed_end = run(RunStatus::Completed, Some("s2"), None);
    assert_eq!(latest_manifest([&failed_end, &done]).as_deref(), Some("s2"));
    // A stopped Run that never started says nothing: the one before it does.
    let never = run(RunStatus::Stopped, None, None);
    assert_eq!(latest_manifest([&never, &done]).as_deref(), Some("e1"));
    // Rolled back: the start of the oldest Run of the block (what the rollback restored).
    let r3 = run(RunStatus::Reverted, Some("s3"), Some("e3"));
    let r4 = run(RunStatus::Reverted, Some("s4"), Some("e4"));
    assert_eq!(latest_manifest([&r4, &r3, &done]).as_deref(), Some("s3"));
    let unstarted = run(RunStatus::Reverted, None, None);
    assert_eq!(latest_manifest([&r4, &unstarted, &done]).as_deref(), Some("e1"));
    assert_eq!(latest_manifest([&r4, &r3]).as_deref(), Some("s3"));
    assert_eq!(latest_manifest([&never]), None);
}

#[test]
fn endings_and_their_events() {
    use crate::session::StopReason as S;
    assert_eq!(ending(S::EndTurn, None), (RunStatus::Completed, None));
    assert_eq!(ending(S::Cancelled, None).0, RunStatus::Stopped);
    let (status, error) = ending(S::Error, Some(("model_error".into(), "boom".into())));
    assert_eq!((status, error.map(|e| e.code)), (RunStatus::Failed, Some("model_error".to_owned())));
    assert_eq!(ending(S::Limit, None).0, RunStatus::Failed);
    assert_eq!(RunStatus::Completed.event_type(), Some("run.completed"));
    assert_eq!(RunStatus::Stopped.event_type(), Some("run.stopped"));
    assert_eq!(RunStatus::Running.event_type(), None);
}

#[test]
fn the_restore_point_is_the_nearest_earlier_checkpoint_that_counts() {
    let base = new("m", "x", vec![]).unwrap_or_else(|e| panic!("{e}")).into_run(
        RunId::from_random([1; 16]),
        ProjectId::from_random([2; 16]),
        EnvironmentId::from_random([3; 16]),
        SessionId::from_random([4; 16]),
        1,
        Timestamp::from_unix_millis(0),
    );
    let with = |status, checkpoint, snapshot: Option<&str>| {
        let mut run = base.clone();
        run.status = status;
        run.checkpoint.status = checkpoint;
        run.checkpoint.snapshot_id = snapshot.map(str::to_owned);
        run
    };
    let ready = with(RunStatus::Completed, CheckpointStatus::Ready, Some("m1"));
    let queued = with(RunStatus::Queued, CheckpointStatus::Pending, None);
    let skipped = with(RunStatus::Failed, CheckpointStatus::Skipped, None);
    let reverted = with(RunStatus::Reverted, CheckpointStatus::Ready, Some("old"));
    let failed = with(RunStatus::Completed, CheckpointStatus::Failed, None);
    let running = with(RunStatus::Running, CheckpointStatus::Pending, None);
    let selected = queued.clone();
    assert_eq!(
        restore_point(&selected, [&queued, &skipped, &reverted, &ready], Some("init")),
        RestorePoint::Manifest("m1".into())
    );
    assert_eq!(restore_point(&selected, [&queued], Some("init")), RestorePoint::Manifest("init".into()));
    assert_eq!(restore_point(&selected, [], None), RestorePoint::Nothing);
    // A failed end checkpoint is skipped: its start, else an earlier ready one.
    assert_eq!(restore_point(&selected, [&failed, &ready], None), RestorePoint::Manifest("m1".into()));
    let mut failed_with_start = failed.clone();
    failed_with_start.start_manifest = Some("s0".into());
    assert_eq!(
        restore_point(&selected, [&failed_with_start, &ready], None),
        RestorePoint::Manifest("s0".into())
    );
    assert!(matches!(
        restore_point(&selected, [&running], Some("init")),
        RestorePoint::Unavailable { status: CheckpointStatus::Pending, .. }
    ));
    // A selected Run that reached its workspace restores its own start, whatever came before.
    let mut started = with(RunStatus::Completed, CheckpointStatus::Ready, Some("after"));
    started.start_manifest = Some("before".into());
    assert_eq!(
        restore_point(&started, [&running, &ready], Some("init")),
        RestorePoint::Manifest("before".into())
    );
    let mut run = with(RunStatus::Reverting, CheckpointStatus::Failed, None);
    revert(&mut run);
    assert_eq!((run.status, run.checkpoint.status), (RunStatus::Reverted, CheckpointStatus::Skipped));
    let mut kept = with(RunStatus::Reverting, CheckpointStatus::Ready, Some("m"));
    revert(&mut kept);
    assert_eq!(kept.checkpoint.status, CheckpointStatus::Ready);
}

#[test]
fn amounts_are_decimal_strings() {
    assert_eq!(usd_string(0), "0");
    assert_eq!(usd_string(1_500), "0.0015");
    assert_eq!(usd_string(2_000_000), "2");
    assert_eq!(usd_string(12_340_000), "12.34");
}
