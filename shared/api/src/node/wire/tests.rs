use serde_json::{Value, json};

use super::*;
use crate::body::from_object;

fn read<T: serde::de::DeserializeOwned>(value: Value) -> T {
    let Value::Object(map) = value else { panic!("an object") };
    from_object(map).expect("a valid body")
}

fn sandbox() -> SandboxId {
    SandboxId::from_random([7; 16])
}

#[test]
fn commands_serialize_as_the_domain_types() {
    let config = ProcessConfig {
        cmd: "sh".into(),
        args: vec!["-c".into()],
        envs: BTreeMap::from([("A".into(), "1".into())]),
        cwd: None,
    };
    let at = Timestamp::from_unix_millis(1_790_000_000_123);
    let commands = [
        Command::CreateSandbox {
            sandbox_id: sandbox(),
            end_at: at,
            env_vars: BTreeMap::new(),
            envd_access_token: None,
        },
        Command::StartProcess { sandbox_id: sandbox(), number: 3, config: config.clone(), tag: None },
        Command::StartProcess {
            sandbox_id: sandbox(),
            number: 4,
            config: ProcessConfig { cwd: Some("/w".into()), ..config },
            tag: Some("t".into()),
        },
        Command::Pause { sandbox_id: sandbox() },
        Command::Resume { sandbox_id: sandbox(), end_at: at },
        Command::SetDeadline { sandbox_id: sandbox(), end_at: at },
        Command::Kill { sandbox_id: sandbox() },
    ];
    for command in commands {
        let envelope =
            CommandEnvelope { id: CommandId::from_random([1; 16]), issued_at: at, expires_at: at, command };
        assert_eq!(json!(CommandEnvelopeBody::from(&envelope)), json!(envelope));
    }
}

/// What the daemon sends (the domain types, serialized) reads back as the same domain value.
#[test]
fn node_bodies_read_as_the_domain_types() {
    let sandbox = sandbox();
    for outcome in [
        CommandOutcome::Done { pid: Some(4), details: BTreeMap::from([("k".into(), "v".into())]) },
        CommandOutcome::Done { pid: None, details: BTreeMap::new() },
        CommandOutcome::Failed { message: "no".into() },
    ] {
        assert_eq!(CommandOutcome::from(read::<CompleteCommand>(json!(outcome))), outcome);
    }
    let heartbeat = Heartbeat {
        connection_id: "c1".into(),
        observed_at: Timestamp::from_unix_millis(5),
        cpu: Some(ProcStatCpu { user: 1, idle: 2, guest_nice: 3, ..ProcStatCpu::default() }),
        total_memory_bytes: Some(10),
        available_memory_bytes: None,
        available_disk_bytes: Some(3),
        effective_cpu_cores: Some(1.5),
        sandboxes: vec![SandboxUsage {
            sandbox_id: sandbox.clone(),
            cpu_seconds: Some(0.5),
            memory_bytes: None,
            memory_limit_bytes: Some(9),
            cpu_limit_cores: None,
        }],
    };
    assert_eq!(Heartbeat::from(read::<HeartbeatRequest>(json!(heartbeat))), heartbeat);
    let at = Timestamp::from_unix_millis(9);
    let process = ProcessId::Observed(1);
    let events = vec![
        NodeEvent::ProcessStarted {
            sandbox_id: sandbox.clone(),
            process,
            pid: 10,
            config: ProcessConfig { cmd: "ls".into(), ..ProcessConfig::default() },
            tag: None,
            at,
        },
        NodeEvent::Output {
            sandbox_id: sandbox.clone(),
            process,
            stream: Stream::Stderr,
            at,
            data: "aGk=".into(),
        },
        NodeEvent::ProcessExited {
            sandbox_id: sandbox.clone(),
            process,
            exit_code: Some(1),
            signal: None,
            at,
        },
        NodeEvent::ObservationResumed { sandbox_id: sandbox.clone(), at },
        NodeEvent::OutputDropped { sandbox_id: sandbox.clone(), process, bytes: 5, chunks: 1 },
        NodeEvent::LiveSeen { sandbox_id: sandbox.clone(), pid: 3, cmd: "x".into(), args: vec![], at },
        NodeEvent::SandboxExpired { sandbox_id: sandbox.clone(), at },
        NodeEvent::InitExited { sandbox_id: sandbox.clone(), at },
        NodeEvent::Isolation {
            sandbox_id: sandbox,
            isolation: BTreeMap::from([("net".into(), "none".into())]),
        },
    ];
    let report = Report {
        connection_id: "c1".into(),
        events: events
            .into_iter()
            .enumerate()
            .map(|(i, event)| SequencedEvent { seq: i as u64 + 1, event })
            .collect(),
    };
    assert_eq!(Report::from(read::<ReportRequest>(json!(report))), report);
}

#[test]
fn a_wrong_typed_field_names_it() {
    let Value::Object(map) = json!({"connection_id": 5, "observed_at": 1}) else { return };
    let err = from_object::<HeartbeatRequest>(map).expect_err("a type error");
    assert_eq!(err.param.as_deref(), Some("connection_id"));
}
