//! Upgrades keep data, checked statically against the previous release's template
//! (`infra/releases/PREVIOUS` names it; its template is checked in as that release shipped it):
//! every stateful resource of the previous release is still there, of the same type, with none
//! of the properties whose change replaces it (so its data) changed; each table gains or loses
//! at most one global secondary index per update (DynamoDB's rule: one index operation per
//! UpdateTable, which CloudFormation cannot batch); and every stateful resource is retained on
//! deletion and on replacement. The deployed check (tests/deployed/upgrade.rs) then updates a
//! stack holding data and reads it back.
// Helpers are test code: a broken template should fail loudly where it is read.
#![allow(clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_yaml::Value;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn read(path: &str) -> Value {
    let text = std::fs::read_to_string(root().join(path)).unwrap_or_else(|e| panic!("{path}: {e}"));
    serde_yaml::from_str(&text).expect("template parses")
}

fn previous_release() -> String {
    std::fs::read_to_string(root().join("infra/releases/PREVIOUS"))
        .expect("infra/releases/PREVIOUS")
        .trim()
        .to_owned()
}

fn resources(t: &Value) -> Vec<(String, Value)> {
    t["Resources"]
        .as_mapping()
        .expect("Resources")
        .iter()
        .map(|(k, v)| (k.as_str().unwrap_or_default().to_owned(), v.clone()))
        .collect()
}

/// The types that hold data, with the properties whose change makes CloudFormation replace
/// the resource (AWS's resource reference: "Update requires: Replacement").
const STATEFUL: &[(&str, &[&str])] = &[
    ("AWS::DynamoDB::Table", &["TableName", "KeySchema"]),
    ("AWS::S3::Bucket", &["BucketName"]),
    ("AWS::SQS::Queue", &["QueueName", "FifoQueue"]),
    ("AWS::SecretsManager::Secret", &["Name"]),
];

fn replacing_properties(kind: &str) -> Option<&'static [&'static str]> {
    STATEFUL.iter().find(|(t, _)| *t == kind).map(|(_, p)| *p)
}

/// What would break an update from `previous` to `current`, one line per problem.
fn upgrade_problems(previous: &Value, current: &Value) -> Vec<String> {
    let now = resources(current);
    let mut problems = Vec::new();
    for (id, was) in resources(previous) {
        let kind = was["Type"].as_str().unwrap_or_default();
        let Some(properties) = replacing_properties(kind) else { continue };
        let Some((_, is)) = now.iter().find(|(i, _)| *i == id) else {
            problems.push(format!("{id} ({kind}) is removed: its data would go with it"));
            continue;
        };
        if is["Type"] != was["Type"] {
            problems.push(format!("{id} changes its type"));
            continue;
        }
        for p in properties {
            if is["Properties"][p] != was["Properties"][p] {
                problems.push(format!("{id}.{p} changes: CloudFormation would replace it"));
            }
        }
        if kind == "AWS::DynamoDB::Table" {
            let names = |t: &Value| -> BTreeSet<String> {
                t["Properties"]["GlobalSecondaryIndexes"]
                    .as_sequence()
                    .into_iter()
                    .flatten()
                    .filter_map(|i| i["IndexName"].as_str().map(str::to_owned))
                    .collect()
            };
            let (before, after) = (names(&was), names(is));
            let changed = before.symmetric_difference(&after).count();
            if changed > 1 {
                problems.push(format!(
                    "{id}: {changed} indexes created or deleted in one update (DynamoDB allows one): {before:?} → {after:?}"
                ));
            }
        }
    }
    problems
}

#[test]
fn an_update_from_the_previous_release_replaces_removes_no_stateful_resource_and_adds_one_index_at_most() {
    let previous = read(&format!("infra/releases/{}/template.yaml", previous_release()));
    let current = read("infra/template.yaml");
    assert!(resources(&previous).len() > 10, "the previous release's template was read");
    let problems = upgrade_problems(&previous, &current);
    assert!(problems.is_empty(), "{problems:#?}");
}

#[test]
fn the_checker_catches_a_replaced_table_a_removed_queue_and_two_new_indexes() {
    let previous: Value = serde_yaml::from_str(
        "Resources:
  T:
    Type: AWS::DynamoDB::Table
    Properties:
      KeySchema: [{AttributeName: PK, KeyType: HASH}]
  U:
    Type: AWS::DynamoDB::Table
    Properties:
      KeySchema: [{AttributeName: PK, KeyType: HASH}]
      GlobalSecondaryIndexes: [{IndexName: a}]
  Q:
    Type: AWS::SQS::Queue
  F:
    Type: AWS::Serverless::Function
",
    )
    .expect("yaml");
    let current: Value = serde_yaml::from_str(
        "Resources:
  T:
    Type: AWS::DynamoDB::Table
    Properties:
      KeySchema: [{AttributeName: ID, KeyType: HASH}]
  U:
    Type: AWS::DynamoDB::Table
    Properties:
      KeySchema: [{AttributeName: PK, KeyType: HASH}]
      GlobalSecondaryIndexes: [{IndexName: a}, {IndexName: b}, {IndexName: c}]
",
    )
    .expect("yaml");
    let problems = upgrade_problems(&previous, &current);
    assert_eq!(problems.len(), 3, "{problems:#?}");
    assert!(problems[0].starts_with("T.KeySchema changes"), "{problems:#?}");
    assert!(problems[1].starts_with("U: 2 indexes"), "{problems:#?}");
    assert!(problems[2].starts_with("Q (AWS::SQS::Queue) is removed"), "{problems:#?}");
    assert!(upgrade_problems(&previous, &previous).is_empty());
}

#[test]
fn every_table_bucket_queue_and_the_sealing_key_are_retained_on_delete_and_on_replacement() {
    let t = read("infra/template.yaml");
    let mut checked = 0;
    for (id, r) in resources(&t) {
        let kind = r["Type"].as_str().unwrap_or_default();
        let holds_data = matches!(kind, "AWS::DynamoDB::Table" | "AWS::S3::Bucket" | "AWS::SQS::Queue")
            || id == "WebhookSecretKeySecret";
        if holds_data {
            assert_eq!(r["DeletionPolicy"], "Retain", "{id}: DeletionPolicy");
            assert_eq!(r["UpdateReplacePolicy"], "Retain", "{id}: UpdateReplacePolicy");
            checked += 1;
        }
    }
    assert!(checked >= 12, "{checked} stateful resources");
}

#[test]
fn the_changelog_has_a_section_for_this_release_and_the_previous_one() {
    let changelog = std::fs::read_to_string(root().join("CHANGELOG.md")).expect("CHANGELOG.md");
    let version = env!("CARGO_PKG_VERSION");
    assert!(changelog.contains(&format!("## {version}")), "CHANGELOG.md has no section for {version}");
    assert!(changelog.contains(&format!("## {}", previous_release())), "no section for the previous release");
    for heading in ["Settings", "Migrations", "Breaking changes"] {
        assert!(changelog.contains(heading), "CHANGELOG.md says nothing under {heading}");
    }
}
