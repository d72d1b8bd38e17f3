//! The agent rules of the domain, as a request reaches them: the JSON body read as the wire's
//! `CreateAgent` / `UpdateAgent` (type errors named by path), then `AgentFields` into
//! `new_agent` / `patch_agent`.

use agentplane_domain::agent::*;
use agentplane_domain::ceilings::Ceilings;
use agentplane_domain::ids::AgentId;
use agentplane_domain::{ApiKeyId, ProjectId, Timestamp, ValidationError};
use serde_json::{Value, json};

use super::wire::{CreateAgent, UpdateAgent};
use crate::body::from_object;

fn object(v: Value) -> serde_json::Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    }
}

/// A create body as the route reads it.
fn create_fields(v: Value) -> Result<AgentFields, ValidationError> {
    AgentFields::try_from(from_object::<CreateAgent>(object(v))?)
}

/// A PATCH body as the route reads it.
fn body(v: Value) -> Result<AgentFields, ValidationError> {
    AgentFields::try_from(from_object::<UpdateAgent>(object(v))?)
}

fn make(v: Value) -> Result<Agent, ValidationError> {
    new_agent(
        create_fields(v)?,
        AgentId::from_random([1; 16]),
        ProjectId::from_random([2; 16]),
        Timestamp::from_unix_millis(0),
    )
}

fn patch_agent(
    agent: &mut Agent,
    fields: Result<AgentFields, ValidationError>,
    now: Timestamp,
) -> Result<(), ValidationError> {
    agentplane_domain::agent::patch_agent(agent, fields?, now)
}

fn patch_agent_within(
    agent: &mut Agent,
    fields: Result<AgentFields, ValidationError>,
    now: Timestamp,
    ceilings: &Ceilings,
) -> Result<(), ValidationError> {
    agentplane_domain::agent::patch_agent_within(agent, fields?, now, ceilings)
}

#[test]
fn defaults_follow_the_spec() {
    let agent = make(json!({"name": "a", "model": "m"})).expect("valid");
    assert_eq!(agent.execution.sync_timeout_ms, 600_000);
    assert_eq!(agent.execution.background_max_duration_ms, 1_800_000);
    assert_eq!(agent.draft.attachments.max_files, 10);
    assert_eq!(agent.draft.attachments.max_file_bytes, 20 * 1024 * 1024);
    assert_eq!(agent.draft.human_in_the_loop.approval_timeout_minutes, 1440);
    assert_eq!(agent.latest_version, None);
}

#[test]
fn a_bucket_is_an_s3_bucket_name_or_refused() {
    let err = make(
        json!({"name": "a", "model": "m", "config": {"attachments": {"enabled": true, "bucket": "Mine!"}}}),
    )
    .err()
    .and_then(|e| e.param);
    assert_eq!(err.as_deref(), Some("config.attachments.bucket"));
    let mut agent = make(json!({"name": "a", "model": "m"})).expect("valid");
    let patch = body(json!({"config": {"attachments": {"bucket": "a..b"}}}));
    assert!(patch_agent(&mut agent, patch.clone(), Timestamp::from_unix_millis(1)).is_err());
    assert_eq!(agent.draft.attachments.bucket, None);
    let patch = body(json!({"config": {"attachments": {"bucket": "team-docs"}}}));
    assert!(patch_agent(&mut agent, patch.clone(), Timestamp::from_unix_millis(1)).is_ok());
    let name = agent.draft.attachments.bucket_name().expect("valid").expect("named");
    assert_eq!(name.as_str(), "team-docs");
    assert!(make(json!({"name": "a", "model": "m", "config": {"attachments": {"bucket": null}}})).is_ok());
}

#[test]
fn the_sync_timeout_can_only_be_lowered() {
    assert!(
        make(json!({"name": "a", "model": "m", "config": {"execution": {"sync_timeout_ms": 600_001}}}))
            .is_err()
    );
    let agent = make(json!({"name": "a", "model": "m", "config": {"execution": {"sync_timeout_ms": 5000}}}))
        .expect("valid");
    assert_eq!(agent.execution.sync_timeout_ms, 5000);
}

#[test]
fn a_default_callback_url_follows_the_webhook_url_rules() {
    let param = |url: Value| {
        make(json!({"name": "a", "model": "m", "config": {"execution": {"default_callback_url": url}}}))
            .err()
            .and_then(|e| e.param)
    };
    for bad in ["ftp://example.com/hook", "example.com/hook", "http://user:pw@example.com/", "http://x/#f"] {
        assert_eq!(param(json!(bad)).as_deref(), Some("config.execution.default_callback_url"), "{bad}");
    }
    assert_eq!(param(json!("https://hooks.example.com/run")), None);
    assert_eq!(param(Value::Null), None);
    let mut agent = make(json!({"name": "a", "model": "m"})).expect("valid");
    let patch = body(json!({"config": {"execution": {"default_callback_url": "gopher://x"}}}));
    assert!(patch_agent(&mut agent, patch.clone(), Timestamp::from_unix_millis(1)).is_err());
    assert_eq!(agent.execution.default_callback_url, None);
}

#[test]
fn who_may_answer_is_any_key_or_a_short_list_of_distinct_key_ids() {
    let key = |n: u8| ApiKeyId::from_random([n; 16]).to_string();
    let hitl = |ids: Value| {
        make(json!({"name": "a", "model": "m", "config": {"humanInTheLoop": {"answer_key_ids": ids}}}))
    };
    assert_eq!(
        make(json!({"name": "a", "model": "m"})).expect("valid").draft.human_in_the_loop.answer_key_ids,
        None
    );
    let agent = hitl(json!([key(1), key(2)])).expect("valid");
    assert_eq!(
        agent.draft.human_in_the_loop.answer_key_ids,
        Some(vec![ApiKeyId::from_random([1; 16]), ApiKeyId::from_random([2; 16])])
    );
    assert_eq!(hitl(Value::Null).expect("valid").draft.human_in_the_loop.answer_key_ids, None);
    let param = |ids: Value| hitl(ids).err().and_then(|e| e.param);
    let p = "config.humanInTheLoop.answer_key_ids";
    assert_eq!(param(json!([])).as_deref(), Some(p));
    let many: Vec<String> = (0..=MAX_ANSWER_KEYS as u8).map(key).collect();
    assert_eq!(param(json!(many)).as_deref(), Some(p));
    assert_eq!(param(json!([key(1), key(1)])).as_deref(), Some("config.humanInTheLoop.answer_key_ids[1]"));
    // Malformed ids are refused as they are read, named.
    assert_eq!(param(json!(["cpeer_abc"])).as_deref(), Some("config.humanInTheLoop.answer_key_ids[0]"));
    assert_eq!(
        param(json!([key(1), key(0xab).to_uppercase()])).as_deref(),
        Some("config.humanInTheLoop.answer_key_ids[1]")
    );
    // Versions stored before the setting read as any key.
    let old: HumanInTheLoop =
        serde_json::from_value(json!({"tool_approvals": ["add"], "approval_timeout_minutes": 5}))
            .expect("an old stored shape");
    assert_eq!(old.answer_key_ids, None);
}

#[test]
fn execution_settings_are_bounded_by_the_deployments_ceilings() {
    let raised = Ceilings { sync_ms: 840_000, background_ms: 7_200_000 };
    let create = |execution: Value, ceilings: &Ceilings| {
        new_agent_within(
            create_fields(json!({"name": "a", "model": "m", "config": {"execution": execution}}))?,
            AgentId::from_random([1; 16]),
            ProjectId::from_random([2; 16]),
            Timestamp::from_unix_millis(0),
            ceilings,
        )
    };
    // A new agent runs as long as the deployment allows.
    let agent = create(json!({}), &raised).expect("valid");
    assert_eq!(
        (agent.execution.sync_timeout_ms, agent.execution.background_max_duration_ms),
        (840_000, 7_200_000)
    );
    assert!(
        create(json!({"sync_timeout_ms": 700_000, "background_max_duration_ms": 3_600_000}), &raised).is_ok()
    );
    assert!(create(json!({"sync_timeout_ms": 840_001}), &raised).is_err());
    assert!(create(json!({"background_max_duration_ms": 7_200_001}), &raised).is_err());
    // Lowered: only up to it.
    let lowered = Ceilings { sync_ms: 30_000, background_ms: 60_000 };
    assert!(create(json!({"sync_timeout_ms": 30_001}), &lowered).is_err());
    let mut agent = create(json!({}), &raised).expect("valid");
    // A value saved under a higher ceiling does not block changing other settings.
    let patch = body(json!({"config": {"execution": {"budget_action": "stop"}}}));
    assert!(patch_agent_within(&mut agent, patch.clone(), Timestamp::from_unix_millis(1), &lowered).is_ok());
    let patch = body(json!({"config": {"execution": {"sync_timeout_ms": 840_001}}}));
    assert!(patch_agent_within(&mut agent, patch.clone(), Timestamp::from_unix_millis(2), &lowered).is_err());
}

#[test]
fn bad_fields_name_themselves() {
    let param = |v| make(v).err().and_then(|e| e.param);
    assert_eq!(param(json!({"name": "a"})).as_deref(), Some("model"));
    assert_eq!(param(json!({"name": "a", "model": 1})).as_deref(), Some("model"));
    assert_eq!(param(json!({"name": "a", "model": "m", "tools": "x"})).as_deref(), Some("tools"));
    assert_eq!(param(json!({"name": "a", "model": "m", "tools": ["a", "a"]})).as_deref(), Some("tools[1]"));
    assert_eq!(param(json!({"name": "a", "model": "m", "max_steps": 0})).as_deref(), Some("max_steps"));
    assert_eq!(
        param(json!({"name": "a", "model": "m", "config": {"execution": {"nope": 1}}})).as_deref(),
        Some("config.execution.nope")
    );
    assert_eq!(
        param(json!({"name": "a", "model": "m", "config": {"humanInTheLoop": []}})).as_deref(),
        Some("config.humanInTheLoop")
    );
    assert_eq!(
        param(json!({"name": "a", "model": "m", "config": {"appearance": {}}})).as_deref(),
        Some("config.appearance")
    );
    assert_eq!(param(json!({"name": "a", "model": "m", "config": 1})).as_deref(), Some("config"));
    // The sections are read under `config` only; at the top level they are refused, not ignored.
    assert_eq!(
        param(json!({"name": "a", "model": "m", "execution": {"sync_timeout_ms": 5}})).as_deref(),
        Some("execution")
    );
}

#[test]
fn a_patch_replaces_only_what_it_names() {
    let mut agent = make(json!({"name": "a", "model": "m", "instructions": "be brief"})).expect("valid");
    patch_agent(&mut agent, body(json!({"model": "m2"})), Timestamp::from_unix_millis(5)).expect("valid");
    assert_eq!(agent.draft.model, "m2");
    assert_eq!(agent.draft.instructions, "be brief");
    assert!(patch_agent(&mut agent, body(json!({})), Timestamp::from_unix_millis(6)).is_err());
    assert!(patch_agent(&mut agent, body(json!({"model": null})), Timestamp::from_unix_millis(6)).is_err());
}

#[test]
fn a_config_patch_changes_only_the_settings_it_names() {
    let mut agent = make(json!({"name": "a", "model": "m", "config": {
        "execution": {"sync_timeout_ms": 5000, "max_cost_usd": 2.5},
        "humanInTheLoop": {"tool_approvals": ["add"]},
    }}))
    .expect("valid");
    let patch = json!({"config": {"execution": {"budget_action": "stop"}}});
    patch_agent(&mut agent, body(patch), Timestamp::from_unix_millis(5)).expect("valid");
    assert_eq!(agent.execution.budget_action, BudgetAction::Stop);
    assert_eq!(agent.execution.sync_timeout_ms, 5000);
    assert_eq!(agent.execution.max_cost_usd, Some(2.5));
    assert_eq!(agent.draft.human_in_the_loop.tool_approvals, ["add"]);

    let patch = json!({"config": {"execution": {"max_cost_usd": null}}});
    patch_agent(&mut agent, body(patch), Timestamp::from_unix_millis(6)).expect("valid");
    assert_eq!(agent.execution.max_cost_usd, None);
    assert_eq!(agent.execution.sync_timeout_ms, 5000);

    let bad = json!({"config": {"execution": {"sync_timeout_ms": 0}}});
    assert!(patch_agent(&mut agent, body(bad), Timestamp::from_unix_millis(7)).is_err());
}

mod experience {
    use serde_json::json;

    use super::*;

    #[allow(clippy::needless_pass_by_value)]
    fn create(config: Value) -> Result<Agent, ValidationError> {
        new_agent(
            create_fields(json!({"name": "a", "model": "m", "config": config}))?,
            AgentId::from_random([1; 16]),
            ProjectId::from_random([2; 16]),
            Timestamp::from_unix_seconds(1),
        )
    }

    #[test]
    fn experience_settings_are_validated_and_patched_field_by_field() {
        let agent = create(
            json!({"experience": {"display_name": "Ada", "greeting": "Hi!", "suggested_prompts": ["One", "Two"]}}),
        );
        let mut agent = agent.unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(agent.draft.experience.display_name.as_deref(), Some("Ada"));
        assert_eq!(agent.draft.experience.suggested_prompts, ["One", "Two"]);
        let bad = |config: Value| create(config).err().and_then(|e| e.param);
        assert_eq!(
            bad(json!({"experience": {"display_name": " "}})).as_deref(),
            Some("config.experience.display_name")
        );
        assert_eq!(
            bad(json!({"experience": {"greeting": "x".repeat(2001)}})).as_deref(),
            Some("config.experience.greeting")
        );
        assert_eq!(
            bad(json!({"experience": {"suggested_prompts": vec!["a"; 9]}})).as_deref(),
            Some("config.experience.suggested_prompts")
        );
        assert_eq!(
            bad(json!({"experience": {"suggested_prompts": ["a", "a"]}})).as_deref(),
            Some("config.experience.suggested_prompts[1]")
        );
        assert_eq!(
            bad(json!({"experience": {"suggested_prompts": [""]}})).as_deref(),
            Some("config.experience.suggested_prompts[0]")
        );
        assert_eq!(
            bad(json!({"experience": {"colour": "red"}})).as_deref(),
            Some("config.experience.colour")
        );
        // A PATCH changes only what it names.
        let patch = json!({"config": {"experience": {"greeting": "Hello"}}});
        patch_agent(&mut agent, body(patch), Timestamp::from_unix_seconds(2))
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(agent.draft.experience.greeting.as_deref(), Some("Hello"));
        assert_eq!(agent.draft.experience.display_name.as_deref(), Some("Ada"));
        // A stored version from before experience reads as none.
        let old: VersionedConfig = serde_json::from_value(json!({
            "model": "m", "instructions": "", "tools": [], "max_steps": 8,
            "attachments": Attachments::default(), "humanInTheLoop": HumanInTheLoop::default(),
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(old.experience, Experience::default());
    }
}

#[test]
fn the_wire_names_the_setting_a_request_got_wrong() {
    let param = |v| make(v).err().and_then(|e| e.param);
    let config = |c: Value| json!({"name": "a", "model": "m", "config": c});
    // A wrong type names the setting itself, not its section.
    for (c, expected) in [
        (json!({"execution": {"sync_timeout_ms": "fast"}}), "config.execution.sync_timeout_ms"),
        (json!({"attachments": {"max_files": -1}}), "config.attachments.max_files"),
        (
            json!({"humanInTheLoop": {"client_tools": [{"name": 5}]}}),
            "config.humanInTheLoop.client_tools[0].name",
        ),
        // `null` clears only what may be null.
        (json!({"execution": {"sync_timeout_ms": null}}), "config.execution.sync_timeout_ms"),
        (json!({"attachments": {"enabled": null}}), "config.attachments.enabled"),
        // A section is an object, never an array read field by field.
        (json!({"execution": [5000]}), "config.execution"),
        (json!([{"sync_timeout_ms": 5000}]), "config"),
        (json!({"appearance": {}}), "config.appearance"),
    ] {
        assert_eq!(param(config(c.clone())).as_deref(), Some(expected), "{c}");
    }
    assert_eq!(
        param(json!({"name": "a", "model": "m", "tools": [{"type": "function"}]})).as_deref(),
        Some("tools[0]")
    );
    assert_eq!(param(json!({"name": null, "model": "m"})).as_deref(), Some("name"));
    // What may be null is cleared; an unknown top-level field is left unread, as before.
    let agent = make(config(json!({"execution": {"max_cost_usd": null, "default_callback_url": null},
        "experience": {"display_name": null}})))
    .expect("valid");
    assert_eq!(agent.execution.max_cost_usd, None);
    assert!(make(json!({"name": "a", "model": "m", "temperature": 0.2})).is_ok());

    let mut agent = make(json!({"name": "a", "model": "m", "instructions": "be brief"})).expect("valid");
    // `config: null` is a change of nothing, not an empty PATCH; `name: null` is refused.
    assert!(patch_agent(&mut agent, body(json!({"config": null})), Timestamp::from_unix_millis(1)).is_ok());
    let array = patch_agent(&mut agent, body(json!({"config": [{}]})), Timestamp::from_unix_millis(1));
    assert_eq!(array.err().and_then(|e| e.param).as_deref(), Some("config"));
    let refused = patch_agent(&mut agent, body(json!({"name": null})), Timestamp::from_unix_millis(2));
    assert_eq!(refused.err().and_then(|e| e.param).as_deref(), Some("name"));
    // A refused PATCH changes nothing, not even the fields before the bad one.
    let refused = body(json!({"model": "m2", "max_steps": 99}));
    assert!(patch_agent(&mut agent, refused, Timestamp::from_unix_millis(3)).is_err());
    assert_eq!((agent.draft.model.as_str(), agent.draft.max_steps), ("m", 8));
}
