//! infra/template.yaml against the code: every route and job is deployed once, from the one binary,
//! each route's API event matches the router, tables/queues/buckets agree with the one resource
//! definition, IAM is least-privilege, the Core key is never a literal, and cfn-lint is clean.
// Helpers are test code: a broken template should fail loudly where it is read.
#![allow(clippy::expect_used)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use agentplane_api::Route;
use agentplane_api::grants::{self, Access};
use agentplane_api::jobs::Job;
use agentplane_store::resources::{BUCKETS, QUEUES, TABLES};
use serde_yaml::Value;

mod operations;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn template() -> Value {
    let text = std::fs::read_to_string(root().join("infra/template.yaml")).expect("infra/template.yaml");
    serde_yaml::from_str(&text).expect("template parses")
}

fn resources(t: &Value) -> &serde_yaml::Mapping {
    t["Resources"].as_mapping().expect("Resources")
}

fn str_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => n.to_string(),
        Value::Tagged(t) => format!("{} {}", t.tag, str_of(&t.value)),
        other => format!("{other:?}"),
    }
}

/// `(logical id, binary name)` of every Lambda function in the template.
fn functions(t: &Value) -> Vec<(String, &Value)> {
    resources(t)
        .iter()
        .filter(|(_, r)| r["Type"] == "AWS::Serverless::Function")
        .map(|(id, r)| (str_of(id), r))
        .collect()
}

/// The branch of `!If [StreamedResponses, on AWS, on LocalStack]` that AWS deploys (the
/// default `StreamingResponses=true`), and the local one.
fn streamed_branches(v: &Value) -> (Value, Value) {
    match v {
        Value::Tagged(t) if t.tag == "!If" => {
            let s = t.value.as_sequence().expect("!If [condition, then, else]");
            assert_eq!(s.len(), 3, "!If [condition, then, else]");
            assert_eq!(s[0], "StreamedResponses", "streaming is chosen by the StreamingResponses parameter");
            (s[1].clone(), s[2].clone())
        }
        other => panic!("expected !If [StreamedResponses, …]: {other:?}"),
    }
}

/// The route or job a function serves: its binary's name.
fn served(function: &Value) -> String {
    str_of(&function["Metadata"]["BuildProperties"]["Binary"])
}

#[test]
fn every_route_and_job_is_deployed_once_from_its_own_binary_and_nothing_else_is() {
    let t = template();
    let mut deployed = BTreeSet::new();
    for (id, function) in functions(&t) {
        let binary = served(function);
        assert!(
            root().join("functions/src/bin").join(format!("{binary}.rs")).is_file(),
            "{id}: functions/src/bin/{binary}.rs builds its binary"
        );
        assert_eq!(str_of(&function["Metadata"]["BuildMethod"]), "rust-cargolambda", "{id}");
        assert!(deployed.insert(binary.clone()), "{id}: {binary} is deployed twice");
    }
    assert!(t["Globals"]["Function"]["Metadata"].is_null(), "each function names its own binary");
    let routed: BTreeSet<String> = Route::ALL.iter().map(|r| r.function_name().to_owned()).collect();
    let jobs: BTreeSet<String> = Job::ALL.iter().map(|j| j.function_name().to_owned()).collect();
    assert!(routed.is_disjoint(&jobs), "a name is both a route and a job");
    let named: BTreeSet<String> = routed.union(&jobs).cloned().collect();
    assert_eq!(deployed, named, "template functions vs Route::ALL and Job::ALL");
}

/// functions/src/bin/ holds exactly the binaries `cargo xtask functions` writes: one per route
/// (taking its declaration at compile time) and one per job.
#[test]
fn the_function_binaries_are_what_cargo_xtask_functions_writes() {
    let dir = root().join(xtask::FUNCTIONS_BIN);
    let expected = xtask::function_sources();
    assert_eq!(expected.len(), Route::ALL.len() + Job::ALL.len());
    let mut present: Vec<String> = std::fs::read_dir(&dir)
        .expect("functions/src/bin")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    present.sort();
    let mut names: Vec<String> = expected.iter().map(|(f, _)| f.clone()).collect();
    names.sort();
    assert_eq!(present, names, "functions/src/bin is stale: run `cargo xtask functions`");
    for (file, source) in expected {
        let text = std::fs::read_to_string(dir.join(&file)).expect("a function binary");
        assert_eq!(text, source, "functions/src/bin/{file} is stale: run `cargo xtask functions`");
    }
}

/// infra/template.yaml's generated regions (every function, the streamed integrations and their
/// permissions, the roles) are exactly what `cargo xtask template` writes from Route::ALL and
/// Job::ALL; the rest of the file is hand-written.
#[test]
fn the_template_is_what_cargo_xtask_template_writes() {
    let path = root().join(xtask::template::TEMPLATE);
    let text = std::fs::read_to_string(&path).expect("infra/template.yaml");
    let rendered = xtask::template::render(&text).expect("the template's generated regions");
    if rendered != text {
        let (line, (ours, theirs)) = text
            .lines()
            .zip(rendered.lines())
            .enumerate()
            .find(|(_, (a, b))| a != b)
            .unwrap_or((text.lines().count().min(rendered.lines().count()), ("", "")));
        panic!(
            "infra/template.yaml is stale: run `cargo xtask template` (line {}: {ours:?}, generated {theirs:?})",
            line + 1
        );
    }
}

/// The resources CloudFormation holds once the SAM transform has expanded the template: a
/// function is its `AWS::Lambda::Function` and its role (unless it names one), and an `Api`
/// event a permission, a `Schedule` a rule and a permission, an `SQS` event a mapping; the
/// `AWS::Serverless::Api` a REST API, a deployment and a stage.
fn resources_after_transform(t: &Value) -> usize {
    resources(t)
        .values()
        .map(|r| match r["Type"].as_str().unwrap_or_default() {
            "AWS::Serverless::Function" => {
                let role = usize::from(r["Properties"]["Role"].is_null());
                let events = r["Properties"]["Events"].as_mapping().map(|m| m.values().collect::<Vec<_>>());
                let events: usize = events
                    .unwrap_or_default()
                    .iter()
                    .map(|e| match e["Type"].as_str().unwrap_or_default() {
                        "Schedule" | "ScheduleV2" => 2,
                        _ => 1,
                    })
                    .sum();
                1 + role + events
            }
            "AWS::Serverless::Api" => 3,
            _ => 1,
        })
        .sum()
}

/// The design's budget: the stack stays well under CloudFormation's 500 resources, with room
/// for the routes still to come (the deployed smoke suite checks the real count, too).
#[test]
fn the_stack_stays_within_its_resource_budget_after_the_sam_transform() {
    let t = template();
    let count = resources_after_transform(&t);
    let roles = resources(&t).values().filter(|r| is_function_role(r)).count();
    let functions = functions(&t);
    eprintln!(
        "{count} resources after the SAM transform (budget 400, limit 500): {} functions sharing {roles} roles \
         (341 when each function had its own)",
        functions.len()
    );
    // Each function names its role, one of the template's, so SAM adds none.
    for (id, function) in &functions {
        let role = role_of(&t, function);
        assert_eq!(role["Type"], "AWS::IAM::Role", "{id}");
    }
    assert!(roles < functions.len() / 2, "roles are shared: {roles} roles for {} functions", functions.len());
    assert!(count > functions.len() + roles, "the estimate counts every function and role: {count}");
    assert!(count <= 400, "{count} resources: over the 400 budget (share roles or nest stacks)");
}

/// The logical id of the function that serves `route`.
fn function_id(t: &Value, route: Route) -> String {
    functions(t)
        .into_iter()
        .find(|(_, f)| served(f) == route.function_name())
        .map(|(id, _)| id)
        .expect("every route has its function")
}

#[test]
fn each_route_function_has_exactly_its_api_event() {
    let t = template();
    for (id, function) in functions(&t) {
        let Some(route) = Route::by_function_name(&served(function)) else { continue };
        if route.streaming() {
            // Its integration is in the Api's DefinitionBody (see below): an Api event would
            // declare the same method a second time, buffered.
            assert!(function["Properties"]["Events"].is_null(), "{id}: a streamed route has no Api event");
            continue;
        }
        let events = function["Properties"]["Events"].as_mapping().expect("Events");
        assert_eq!(events.len(), 1, "{id} has other events");
        let event = events.values().next().expect("one event");
        assert_eq!(event["Type"], "Api", "{id} must be a REST API event");
        assert_eq!(str_of(&event["Properties"]["Path"]), route.path(), "{id}");
        assert_eq!(str_of(&event["Properties"]["Method"]).to_uppercase(), route.method().as_str(), "{id}");
        assert_eq!(str_of(&event["Properties"]["RestApiId"]), "!Ref Api", "{id}");
    }
    assert_eq!(resources(&t)["Api"]["Type"], "AWS::Serverless::Api", "a REST API (not an HTTP API)");
    // SAM adds the Api events' paths to an inline DefinitionBody only when told to merge.
    assert_eq!(resources(&t)["Api"]["Properties"]["MergeDefinitions"], true, "MergeDefinitions");
}

#[test]
fn streamed_routes_use_streamed_integrations_that_outlast_their_answers() {
    let t = template();
    let ceiling_s = agentplane_domain::agent::SYNC_TIMEOUT_CEILING_MS / 1000;
    let stream_s = agentplane_api::app::StreamConfig::default().max_duration.as_secs();
    let paths = t["Resources"]["Api"]["Properties"]["DefinitionBody"]["paths"].as_mapping().expect("paths");
    let streamed: Vec<Route> = Route::ALL.iter().copied().filter(|r| r.streaming()).collect();
    assert!(streamed.contains(&Route::ClientSessionEventsStream), "the SSE route streams");
    assert!(Route::ALL.iter().filter(|r| r.runs_turns()).all(|r| r.streaming()), "every turn route streams");
    assert_eq!(paths.len(), streamed.len(), "the DefinitionBody declares the streamed routes only");
    for route in streamed {
        let id = function_id(&t, route);
        let method = route.method().as_str().to_lowercase();
        let integration = &t["Resources"]["Api"]["Properties"]["DefinitionBody"]["paths"][route.path()]
            [method.as_str()]["x-amazon-apigateway-integration"];
        assert_eq!(integration["type"], "aws_proxy", "{id}");
        assert_eq!(integration["httpMethod"], "POST", "{id}: Lambda is invoked with POST");
        let (mode, buffered_mode) = streamed_branches(&integration["responseTransferMode"]);
        assert_eq!((mode, buffered_mode), (Value::from("STREAM"), Value::from("BUFFERED")), "{id}");
        let (uri, buffered_uri) = streamed_branches(&integration["uri"]);
        let (uri, buffered_uri) = (str_of(&uri), str_of(&buffered_uri));
        assert!(
            uri.starts_with("!Sub ")
                && uri.ends_with(&format!(
                    "lambda:path/2021-11-15/functions/${{{id}.Arn}}/response-streaming-invocations"
                )),
            "{id}: {uri}"
        );
        // LocalStack (StreamingResponses=false): the buffered proxy integration of the same function.
        assert!(
            buffered_uri.starts_with("!Sub ")
                && buffered_uri
                    .ends_with(&format!("lambda:path/2015-03-31/functions/${{{id}.Arn}}/invocations")),
            "{id}: {buffered_uri}"
        );
        let (integration_ms, buffered_ms) = streamed_branches(&integration["timeoutInMillis"]);
        assert_eq!(buffered_ms.as_u64(), Some(29_000), "{id}: a buffered integration's ceiling");
        let integration_ms = integration_ms.as_u64().expect("timeoutInMillis");
        assert!(integration_ms <= 900_000, "{id}: a streamed integration lasts at most 15 minutes");
        let function = &resources(&t)[id.as_str()]["Properties"];
        let timeout_s = function["Timeout"].as_u64().expect("Timeout");
        if route.runs_turns() {
            // A turn answers at the ceiling at the latest; the function lives on past it to
            // record the turn's end, and the integration waits as long as the function lives.
            assert!(
                timeout_s > ceiling_s,
                "{id}: Lambda timeout {timeout_s} s must exceed the {ceiling_s} s ceiling"
            );
            assert!(integration_ms >= timeout_s * 1000, "{id}: integration timeout {integration_ms} ms");
        } else {
            assert!(timeout_s > stream_s && integration_ms > stream_s * 1000, "{id}: the stream ends first");
        }
        // API Gateway may invoke it, on this method and path only.
        let permission =
            &resources(&t)[format!("{}StreamPermission", id.trim_end_matches("Function")).as_str()];
        assert_eq!(permission["Type"], "AWS::Lambda::Permission", "{id}");
        let p = &permission["Properties"];
        assert_eq!(str_of(&p["FunctionName"]), format!("!Ref {id}"));
        assert_eq!(p["Principal"], "apigateway.amazonaws.com");
        assert_eq!(p["Action"], "lambda:InvokeFunction");
        let arn_path: String = route
            .path()
            .split('/')
            .map(|s| if s.starts_with('{') { "*" } else { s })
            .collect::<Vec<_>>()
            .join("/");
        assert!(
            str_of(&p["SourceArn"]).ends_with(&format!("${{Api}}/*/{}{arn_path}", route.method().as_str())),
            "{id}: {:?}",
            p["SourceArn"]
        );
    }
}

#[test]
fn each_job_function_is_triggered_by_its_schedule_or_its_queue_only() {
    let t = template();
    let mut seen = BTreeSet::new();
    for (id, function) in functions(&t) {
        let Some(job) = Job::by_function_name(&served(function)) else { continue };
        seen.insert(job.function_name());
        let events = function["Properties"]["Events"].as_mapping().expect("Events");
        assert_eq!(events.len(), 1, "{id} has other events");
        let event = events.values().next().expect("one event");
        match job.queue() {
            None => {
                assert_eq!(event["Type"], "Schedule", "{id} runs on a schedule");
                assert!(str_of(&event["Properties"]["Schedule"]).starts_with("rate("), "{id}");
            }
            Some(queue) => {
                assert_eq!(event["Type"], "SQS", "{id} consumes its queue");
                let p = &event["Properties"];
                assert_eq!(str_of(&p["Queue"]), format!("!GetAtt {queue}.Arn"), "{id}");
                // A failed message is retried alone, never its whole batch.
                assert_eq!(p["FunctionResponseTypes"][0], "ReportBatchItemFailures", "{id}");
                let spec = QUEUES.iter().find(|q| q.logical_id == queue).expect("a defined queue");
                let timeout_s = function["Properties"]["Timeout"].as_u64().expect("Timeout");
                assert!(timeout_s <= 900, "{id}: Lambda's ceiling is 900 s");
                assert!(
                    timeout_s < u64::from(spec.visibility_timeout_s),
                    "{id}: a message must stay hidden while its run goes on"
                );
            }
        }
    }
    assert_eq!(seen.len(), Job::ALL.len(), "every job is deployed");
}

#[test]
fn functions_are_arm64_al2023_built_with_cargo_lambda() {
    let t = template();
    let globals = &t["Globals"]["Function"];
    assert_eq!(globals["Runtime"], "provided.al2023");
    // The Architecture parameter, arm64 unless a local deploy says x86_64.
    assert_eq!(str_of(&globals["Architectures"][0]), "!Ref Architecture");
    assert_eq!(t["Parameters"]["Architecture"]["Default"], "arm64");
    for (id, function) in functions(&t) {
        assert_eq!(function["Metadata"]["BuildMethod"], "rust-cargolambda", "{id}");
    }
}

#[test]
fn tables_match_the_resource_definitions() {
    let t = template();
    for spec in &TABLES {
        let table = &resources(&t)[spec.logical_id];
        assert_eq!(table["Type"], "AWS::DynamoDB::Table", "{}", spec.logical_id);
        let p = &table["Properties"];
        let key = |schema: &Value, kind: &str| {
            schema
                .as_sequence()
                .expect("KeySchema")
                .iter()
                .find(|k| k["KeyType"] == kind)
                .map(|k| str_of(&k["AttributeName"]))
                .expect("key")
        };
        assert_eq!(key(&p["KeySchema"], "HASH"), spec.key.partition.0);
        assert_eq!(key(&p["KeySchema"], "RANGE"), spec.key.sort.0);
        let attr_type = |name: &str| {
            p["AttributeDefinitions"]
                .as_sequence()
                .expect("AttributeDefinitions")
                .iter()
                .find(|a| a["AttributeName"] == name)
                .map(|a| str_of(&a["AttributeType"]))
                .unwrap_or_default()
        };
        let mut expected_attrs = BTreeSet::new();
        for (name, kind) in [spec.key.partition, spec.key.sort]
            .into_iter()
            .chain(spec.indexes.iter().flat_map(|i| [i.key.partition, i.key.sort]))
        {
            assert_eq!(attr_type(name), kind.as_str(), "{}.{name}", spec.logical_id);
            expected_attrs.insert(name.to_owned());
        }
        assert_eq!(p["AttributeDefinitions"].as_sequence().map(Vec::len), Some(expected_attrs.len()));
        let indexes = p["GlobalSecondaryIndexes"].as_sequence().cloned().unwrap_or_default();
        assert_eq!(indexes.len(), spec.indexes.len(), "{}", spec.logical_id);
        for index in spec.indexes {
            let found = indexes.iter().find(|i| i["IndexName"] == index.name).expect("index in template");
            assert_eq!(key(&found["KeySchema"], "HASH"), index.key.partition.0);
            assert_eq!(key(&found["KeySchema"], "RANGE"), index.key.sort.0);
            assert_eq!(found["Projection"]["ProjectionType"], "ALL");
        }
        assert_eq!(str_of(&p["TimeToLiveSpecification"]["AttributeName"]), spec.ttl_attribute);
        assert_eq!(p["TimeToLiveSpecification"]["Enabled"], true);
        assert_eq!(p["BillingMode"], "PAY_PER_REQUEST");
    }
}

#[test]
fn queues_have_their_dead_letter_queues() {
    let t = template();
    for spec in &QUEUES {
        let queue = &resources(&t)[spec.logical_id]["Properties"];
        assert_eq!(
            str_of(&queue["RedrivePolicy"]["deadLetterTargetArn"]),
            format!("!GetAtt {}.Arn", spec.dlq_logical_id)
        );
        assert_eq!(str_of(&queue["RedrivePolicy"]["maxReceiveCount"]), spec.max_receive_count.to_string());
        assert_eq!(str_of(&queue["VisibilityTimeout"]), spec.visibility_timeout_s.to_string());
        assert_eq!(resources(&t)[spec.dlq_logical_id]["Type"], "AWS::SQS::Queue");
    }
}

#[test]
fn buckets_are_encrypted_and_never_public() {
    let t = template();
    for spec in &BUCKETS {
        let p = &resources(&t)[spec.logical_id]["Properties"];
        assert!(p["BucketEncryption"].is_mapping(), "{}", spec.logical_id);
        for flag in ["BlockPublicAcls", "BlockPublicPolicy", "IgnorePublicAcls", "RestrictPublicBuckets"] {
            assert_eq!(p["PublicAccessBlockConfiguration"][flag], true, "{}.{flag}", spec.logical_id);
        }
    }
}

/// Every `!Ref X` / `!GetAtt X.…` / `!Sub "…${X}…"` of a resource inside a value (a parameter is
/// no resource: `!If [CreateModelApiKeySecret, !Ref ModelApiKeySecret, !Ref ModelApiKeySecretArn]`
/// names the secret either way; nor is a pseudo parameter such as `${AWS::Region}`).
fn references(v: &Value, parameters: &serde_yaml::Mapping, out: &mut BTreeSet<String>) {
    // A parameter is no resource, except the Document Store buckets' pattern, which the
    // policies grant as one.
    let mut add = |name: &str| {
        let name = name.split('.').next().unwrap_or_default();
        if !name.starts_with("AWS::") && (!parameters.contains_key(name) || name == "DocumentBuckets") {
            out.insert(name.to_owned());
        }
    };
    match v {
        Value::Tagged(t) if t.tag == "!Ref" || t.tag == "!GetAtt" => add(&str_of(&t.value)),
        Value::Tagged(t) if t.tag == "!Sub" => {
            let text = t.value.as_str().expect("!Sub \"…\"");
            for piece in text.split("${").skip(1) {
                add(piece.split('}').next().unwrap_or_default());
            }
        }
        Value::Tagged(t) => references(&t.value, parameters, out),
        Value::Mapping(m) => m.values().for_each(|v| references(v, parameters, out)),
        Value::Sequence(s) => s.iter().for_each(|v| references(v, parameters, out)),
        _ => {}
    }
}

/// The role a function names (`Role: !GetAtt <role>.Arn`), a resource of the template.
fn role_of<'t>(t: &'t Value, function: &Value) -> &'t Value {
    let role = str_of(&function["Properties"]["Role"]);
    let id = role
        .strip_prefix("!GetAtt ")
        .and_then(|r| r.strip_suffix(".Arn"))
        .unwrap_or_else(|| panic!("Role: !GetAtt <role>.Arn, not {role:?}"));
    &resources(t)[id]
}

/// The actions of each access, as SAM's policy templates grant them (DynamoDBReadPolicy,
/// DynamoDBCrudPolicy, S3ReadPolicy, S3CrudPolicy, SQSSendMessagePolicy, SQSPollerPolicy,
/// AWSSecretsManagerGetSecretValuePolicy): a statement is exactly one of them.
const ACCESSES: &[(&str, Access, &[&str])] = &[
    (
        "dynamodb",
        Access::Read,
        &[
            "dynamodb:GetItem",
            "dynamodb:Scan",
            "dynamodb:Query",
            "dynamodb:BatchGetItem",
            "dynamodb:DescribeTable",
        ],
    ),
    (
        "dynamodb",
        Access::Write,
        &[
            "dynamodb:GetItem",
            "dynamodb:DeleteItem",
            "dynamodb:PutItem",
            "dynamodb:Scan",
            "dynamodb:Query",
            "dynamodb:UpdateItem",
            "dynamodb:BatchWriteItem",
            "dynamodb:BatchGetItem",
            "dynamodb:DescribeTable",
            "dynamodb:ConditionCheckItem",
        ],
    ),
    (
        "s3",
        Access::Read,
        &[
            "s3:GetObject",
            "s3:ListBucket",
            "s3:GetBucketLocation",
            "s3:GetObjectVersion",
            "s3:GetLifecycleConfiguration",
        ],
    ),
    (
        "s3",
        Access::Write,
        &[
            "s3:GetObject",
            "s3:ListBucket",
            "s3:GetBucketLocation",
            "s3:GetObjectVersion",
            "s3:PutObject",
            "s3:PutObjectAcl",
            "s3:GetLifecycleConfiguration",
            "s3:PutLifecycleConfiguration",
            "s3:DeleteObject",
        ],
    ),
    ("sqs", Access::Send, &["sqs:SendMessage*"]),
    (
        "sqs",
        Access::Consume,
        &[
            "sqs:ChangeMessageVisibility",
            "sqs:ChangeMessageVisibilityBatch",
            "sqs:DeleteMessage",
            "sqs:DeleteMessageBatch",
            "sqs:GetQueueAttributes",
            "sqs:ReceiveMessage",
        ],
    ),
    ("secretsmanager", Access::Read, &["secretsmanager:GetSecretValue"]),
];

/// What a role allows: each resource and how it may use it. Every statement allows exactly one
/// access's actions on one resource (its ARNs: a table's and its indexes', a bucket's and its
/// objects', a queue's, a secret's), never `*`; the role may be assumed by Lambda only and has
/// no managed policy but CloudWatch Logs.
fn granted(t: &Value, role: &Value) -> BTreeSet<(String, Access)> {
    let parameters = t["Parameters"].as_mapping().expect("Parameters");
    let p = &role["Properties"];
    let trust = &p["AssumeRolePolicyDocument"]["Statement"];
    assert_eq!(trust.as_sequence().map(Vec::len), Some(1), "{trust:?}");
    assert_eq!(trust[0]["Principal"]["Service"], "lambda.amazonaws.com");
    assert_eq!(trust[0]["Action"], "sts:AssumeRole");
    assert!(p["ManagedPolicyArns"].is_null(), "a managed policy is broader than needed");
    let policies = p["Policies"].as_sequence().expect("Policies");
    let mut out = BTreeSet::new();
    for policy in policies {
        for statement in policy["PolicyDocument"]["Statement"].as_sequence().expect("Statement") {
            assert_eq!(statement["Effect"], "Allow", "{statement:?}");
            if statement["Sid"] == "Logs" {
                // Writing to its functions' log groups (checked per function below).
                let actions: Vec<String> =
                    statement["Action"].as_sequence().expect("Action").iter().map(str_of).collect();
                assert_eq!(actions, xtask::template::LOGS_WRITE, "{statement:?}");
                for arn in statement["Resource"].as_sequence().expect("Resource") {
                    let group = str_of(arn);
                    let group = group.strip_prefix("!GetAtt ").and_then(|g| g.strip_suffix(".Arn"));
                    let group = group.unwrap_or_else(|| panic!("a log group's Arn: {arn:?}"));
                    assert_eq!(resources(t)[group]["Type"], "AWS::Logs::LogGroup", "{group}");
                }
                continue;
            }
            let actions: BTreeSet<String> =
                statement["Action"].as_sequence().expect("Action: a list").iter().map(str_of).collect();
            let (service, access) = ACCESSES
                .iter()
                .find(|(_, _, a)| a.iter().map(|a| (*a).to_owned()).collect::<BTreeSet<_>>() == actions)
                .map(|(service, access, _)| (*service, *access))
                .unwrap_or_else(|| panic!("unexpected actions {actions:?}"));
            let arns: Vec<String> =
                statement["Resource"].as_sequence().expect("Resource: a list").iter().map(str_of).collect();
            assert!(arns.iter().all(|a| !a.contains('*') || a.ends_with("/*")), "{arns:?}");
            let mut names = BTreeSet::new();
            references(&statement["Resource"], parameters, &mut names);
            assert_eq!(names.len(), 1, "a statement is of one resource: {arns:?}");
            let name = names.pop_first().unwrap_or_default();
            let expected_arns: Vec<String> = match service {
                "dynamodb" => {
                    let table = format!(
                        "!Sub arn:${{AWS::Partition}}:dynamodb:${{AWS::Region}}:${{AWS::AccountId}}:table/${{{name}}}"
                    );
                    vec![table.clone(), format!("{table}/index/*")]
                }
                "s3" => {
                    let bucket = format!("!Sub arn:${{AWS::Partition}}:s3:::${{{name}}}");
                    vec![bucket.clone(), format!("{bucket}/*")]
                }
                "sqs" => vec![format!("!GetAtt {name}.Arn")],
                _ => arns.clone(),
            };
            assert_eq!(arns, expected_arns, "{service} of {name}");
            out.insert((name, access));
        }
    }
    out
}

#[test]
fn each_function_may_touch_only_what_it_uses_and_only_as_it_uses_it() {
    let t = template();
    for (id, function) in functions(&t) {
        let name = served(function);
        let grants = match (Route::by_function_name(&name), Job::by_function_name(&name)) {
            (Some(route), None) => route.grants(),
            (None, Some(job)) => job.grants(),
            _ => panic!("{id}: {name} must be exactly one Route or Job"),
        };
        let expected: BTreeSet<(String, Access)> =
            grants.iter().map(|g| (g.resource.to_owned(), g.access)).collect();
        // Its role's, not policies of its own (SAM would make it a role).
        assert!(function["Properties"]["Policies"].is_null(), "{id}: policies beside its role");
        assert_eq!(granted(&t, role_of(&t, function)), expected, "{id}: read versus write per resource");
        let allowed: BTreeSet<&str> = grants.iter().map(|g| g.resource).collect();
        // The secret's id is given exactly to the functions that may read it.
        let env = &function["Properties"]["Environment"]["Variables"]["AGENTPLANE_CORE_KEY_SECRET_ID"];
        assert_eq!(!env.is_null(), allowed.contains("CoreKeySecret"), "{id}: AGENTPLANE_CORE_KEY_SECRET_ID");
        let model_env =
            &function["Properties"]["Environment"]["Variables"]["AGENTPLANE_MODEL_API_KEY_SECRET_ID"];
        assert_eq!(
            !model_env.is_null(),
            allowed.contains("ModelApiKeySecret"),
            "{id}: AGENTPLANE_MODEL_API_KEY_SECRET_ID"
        );
        let webhook_env =
            &function["Properties"]["Environment"]["Variables"]["AGENTPLANE_WEBHOOK_SECRET_KEY_SECRET_ID"];
        assert_eq!(
            !webhook_env.is_null(),
            allowed.contains("WebhookSecretKeySecret"),
            "{id}: AGENTPLANE_WEBHOOK_SECRET_KEY_SECRET_ID"
        );
    }
    let globals = &t["Globals"]["Function"]["Environment"]["Variables"];
    assert!(globals["AGENTPLANE_CORE_KEY_SECRET_ID"].is_null(), "the secret id must not be global");
}

/// A role the functions assume (the stack's other roles are API Gateway's and the nodes').
fn is_function_role(role: &Value) -> bool {
    role["Type"] == "AWS::IAM::Role"
        && role["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"]["Service"]
            == "lambda.amazonaws.com"
}

/// Functions share a role exactly when their grants are the same set: no two roles allow the
/// same, and every role is some function's.
#[test]
fn each_set_of_grants_is_one_role() {
    let t = template();
    let mut used = BTreeSet::new();
    for (_, function) in functions(&t) {
        used.insert(str_of(&function["Properties"]["Role"]));
    }
    let mut sets = Vec::new();
    for (id, role) in resources(&t).iter().filter(|(_, r)| is_function_role(r)) {
        let id = str_of(id);
        assert!(used.contains(&format!("!GetAtt {id}.Arn")), "{id} is no function's role");
        let set = granted(&t, role);
        assert!(!sets.contains(&set), "{id} allows what another role allows: {set:?}");
        sets.push(set);
    }
    assert_eq!(sets.len(), used.len());
}

/// The `agentplane-*` crates a function binary is built from, with their directories: the
/// walk starts at functions/ and follows each crate's `[dependencies]`.
fn lambda_crates() -> Vec<(String, PathBuf)> {
    let dir_of = |name: &str| match name {
        "agentplane-functions" => "functions",
        "agentplane-api" => "shared/api",
        "agentplane-engine" => "shared/engine",
        "agentplane-store" => "shared/store",
        "agentplane-domain" => "shared/domain",
        "agentplane-documents" => "shared/documents",
        other => panic!("{other} is linked into the functions: add its directory here"),
    };
    let mut todo = vec!["agentplane-functions".to_owned()];
    let mut seen: Vec<(String, PathBuf)> = Vec::new();
    while let Some(name) = todo.pop() {
        if seen.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let dir = root().join(dir_of(&name));
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
        let deps = manifest.split("[dependencies]").nth(1).unwrap_or_default();
        let deps = deps.split("\n[").next().unwrap_or_default();
        todo.extend(
            deps.lines()
                .filter_map(|l| l.split_whitespace().next())
                .filter(|d| d.starts_with("agentplane-"))
                .map(str::to_owned),
        );
        seen.push((name, dir));
    }
    seen
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("source dir").filter_map(|e| e.ok()) {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// A Lambda function builds only the clients it uses: nothing it is built from names S3, SQS or
/// provisioning, except `provision.rs` itself (which only the local gateway and tests call),
/// `objects.rs`, the S3 client of the files bucket, which only the functions granted it build,
/// and `queue.rs`, the SQS client of the `runs` queue, which only its users build (below).
#[test]
fn no_function_builds_s3_or_sqs_clients_or_provisions() {
    const FORBIDDEN: [&str; 5] = ["aws_sdk_s3", "aws_sdk_sqs", "provision::", "Provisioner", "s3_client"];
    let provisioning = root().join("shared/store/src/provision.rs");
    let text = std::fs::read_to_string(&provisioning).expect("provision.rs");
    assert!(text.contains("aws_sdk_s3") && text.contains("aws_sdk_sqs"), "the scan would see the clients");
    let crates = lambda_crates();
    assert!(crates.len() >= 5, "{crates:?}");
    let mut files = Vec::new();
    for (name, dir) in &crates {
        let manifest = std::fs::read_to_string(dir.join("Cargo.toml")).expect("Cargo.toml");
        if name != "agentplane-store" {
            for dep in ["aws-sdk-s3", "aws-sdk-sqs"] {
                assert!(!manifest.contains(dep), "{name} depends on {dep}");
            }
        }
        rust_files(&dir.join("src"), &mut files);
    }
    let objects = root().join("shared/store/src/objects.rs");
    let text = std::fs::read_to_string(&objects).expect("objects.rs");
    assert!(!text.contains("aws_sdk_sqs") && !text.contains("provision::"), "objects.rs is S3 only");
    let queue = root().join("shared/store/src/queue.rs");
    let text = std::fs::read_to_string(&queue).expect("queue.rs");
    assert!(!text.contains("aws_sdk_s3") && !text.contains("provision::"), "queue.rs is SQS only");
    files.retain(|f| *f != provisioning && *f != objects && *f != queue);
    assert!(files.len() > 50, "only {} sources found", files.len());
    for file in files {
        let text = std::fs::read_to_string(&file).expect("source");
        for token in FORBIDDEN {
            assert!(!text.contains(token), "{} names {token}", file.display());
        }
    }
}

/// S3 enters exactly the functions that run turns (transcripts past the item limit), the
/// retention sweep (expired files) and the
/// session file routes that sign URLs, read sizes or delete bytes: only they are granted the
/// files bucket, so only they build the S3 client (`App::from_env` builds it
/// from the grants), and the template gives it to them alone (checked above, per function).
#[test]
fn only_the_functions_that_run_turns_touch_s3() {
    let with_s3: std::collections::HashSet<Route> =
        Route::ALL.iter().copied().filter(|r| grants::uses_objects(r.grants())).collect();
    let turns: std::collections::HashSet<Route> =
        Route::ALL.iter().copied().filter(|r| r.runs_turns()).collect();
    assert_eq!(turns.len(), 6, "{turns:?}");
    let files: std::collections::HashSet<Route> = [
        Route::ClientSessionFilesCreate,
        Route::ClientSessionFilesGet,
        Route::ClientSessionFilesDelete,
        // HeadBucket of the Document Store bucket it registers.
        Route::CoreBucketsRegister,
    ]
    .into_iter()
    .collect();
    assert_eq!(with_s3, turns.union(&files).copied().collect());
    for job in Job::ALL {
        // run-execution runs turns; the rollback restores transcripts, which may live in the files
        // bucket; the retention sweep deletes expired files' bytes.
        let expected = matches!(job, Job::RunExecution | Job::RollbackRestore | Job::RetentionSweep);
        assert_eq!(grants::uses_objects(job.grants()), expected, "{job:?}");
    }
    let lambda = std::fs::read_to_string(root().join("functions/src/lib.rs")).expect("functions/src/lib.rs");
    assert!(lambda.contains("App::from_env(declaration.grants)"));
    let app = std::fs::read_to_string(root().join("shared/api/src/app.rs")).expect("app.rs");
    assert!(app.contains("let objects = crate::grants::uses_objects(grants);"));
    for (_, dir) in lambda_crates() {
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).expect("source");
            if text.contains(".with_objects(") {
                assert!(file.ends_with("shared/api/src/app.rs"), "{} builds the S3 client", file.display());
                assert!(text.contains("if objects {"), "app.rs builds S3 only when asked");
            }
        }
    }
}

/// SQS enters exactly the functions granted the `runs` queue, and the deployed ones get its URL
/// (SQSSendMessagePolicy allows no GetQueueUrl).
#[test]
fn only_the_functions_granted_the_runs_queue_build_its_client() {
    for (name, dir) in lambda_crates() {
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).expect("source");
            if text.contains(".with_runs_queue(") {
                assert!(file.ends_with("shared/api/src/app.rs"), "{name}: {} builds SQS", file.display());
                assert!(text.contains("if crate::grants::uses_runs_queue(grants) {"), "only when granted");
            }
        }
    }
    assert!(grants::uses_runs_queue(Job::RunExecution.grants()));
    assert!(grants::uses_runs_queue(Job::RetentionSweep.grants()));
    assert!(!grants::uses_runs_queue(Job::Sampler.grants()));
    let t = template();
    let globals = &t["Globals"]["Function"]["Environment"]["Variables"];
    assert_eq!(str_of(&globals["AGENTPLANE_RUNS_QUEUE_URL"]), "!Ref RunsQueue");
}

/// The same for the `webhooks` queue: the functions that emit events (those that run or cancel
/// turns, a background run's cancel too) and the two webhook jobs, and nothing else.
#[test]
fn only_the_functions_granted_the_webhooks_queue_build_its_client() {
    for (name, dir) in lambda_crates() {
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).expect("source");
            if text.contains(".with_webhooks_queue(") {
                assert!(file.ends_with("shared/api/src/app.rs"), "{name}: {} builds SQS", file.display());
                assert!(
                    text.contains("if crate::grants::uses_webhooks_queue(grants) {"),
                    "only when granted"
                );
            }
        }
    }
    for job in Job::ALL {
        let expected = matches!(
            job,
            Job::RunExecution
                | Job::WebhookDelivery
                | Job::WebhookRetry
                | Job::RollbackRestore
                // A rollback given up emits `rollback.failed` and `run.*`.
                | Job::RetentionSweep
        );
        assert_eq!(grants::uses_webhooks_queue(job.grants()), expected, "{job:?}");
    }
    for route in Route::ALL {
        // The routes that run turns, and those that cancel (ending a paused turn idles its
        // session) or stop (a queued platform Run stopped at once emits `run.stopped`).
        let emits = route.grants().contains(&grants::MODEL_KEY)
            || matches!(
                route,
                Route::ClientSessionsCancel
                    | Route::ClientResponsesCancel
                    | Route::ClientRunsCancel
                    | Route::PlatformRunsStop
            );
        assert_eq!(grants::uses_webhooks_queue(route.grants()), emits, "{route:?}");
    }
    let t = template();
    let globals = &t["Globals"]["Function"]["Environment"]["Variables"];
    assert_eq!(str_of(&globals["AGENTPLANE_WEBHOOKS_QUEUE_URL"]), "!Ref WebhooksQueue");
}

#[test]
fn read_only_routes_get_read_only_grants() {
    // The table itself: a GET never writes (long-polling the command queue claims commands;
    // reading a workspace file queues a node command and may start the workspace's sandbox; an
    // event stream holds leased places of its key and project while open).
    for route in Route::ALL {
        if route.method() == reqwest::Method::GET
            && !matches!(
                route,
                Route::NodeCommandsPoll
                    | Route::PlatformFilesGet
                    | Route::ClientSessionFilesGet
                    | Route::ClientSessionEventsStream
            )
        {
            assert!(route.grants().iter().all(|g| g.access == Access::Read), "{route:?} reads only");
        }
    }
    assert!(
        Job::Sampler
            .grants()
            .contains(&agentplane_api::grants::Grant { resource: "MainTable", access: Access::Read })
    );
    // And the template: a read-only route's role holds read actions only.
    let t = template();
    let reads: BTreeSet<&str> = ACCESSES
        .iter()
        .filter(|(_, access, _)| *access == Access::Read)
        .flat_map(|(_, _, actions)| actions.iter().copied())
        .collect();
    for route in Route::ALL.iter().filter(|r| r.grants().iter().all(|g| g.access == Access::Read)) {
        let role = role_of(&t, &resources(&t)[function_id(&t, *route).as_str()]);
        for policy in role["Properties"]["Policies"].as_sequence().expect("Policies") {
            for statement in policy["PolicyDocument"]["Statement"].as_sequence().expect("Statement") {
                // Its own log lines are no write of the stack's data.
                if statement["Sid"] == "Logs" {
                    continue;
                }
                for action in statement["Action"].as_sequence().expect("Action") {
                    assert!(
                        reads.contains(str_of(action).as_str()),
                        "{route:?}: {action:?} on a read-only route"
                    );
                }
            }
        }
    }
}

#[test]
fn the_core_key_is_generated_never_a_literal() {
    let t = template();
    let secret = &resources(&t)["CoreKeySecret"];
    assert_eq!(secret["Type"], "AWS::SecretsManager::Secret");
    assert!(secret["Properties"]["GenerateSecretString"].is_mapping());
    assert!(secret["Properties"]["SecretString"].is_null());
    let text = std::fs::read_to_string(root().join("infra/template.yaml")).expect("template");
    assert!(!text.contains("AGENTPLANE_CORE_KEY:"), "a literal Core key variable");
}

fn cfn_lint() -> Option<PathBuf> {
    if let Ok(path) = std::env::var("AGENTPLANE_CFN_LINT") {
        return Some(PathBuf::from(path));
    }
    let local = root().join(".localstack/tools/bin/cfn-lint");
    if local.exists() {
        return Some(local);
    }
    std::process::Command::new("cfn-lint").arg("--version").output().ok().map(|_| PathBuf::from("cfn-lint"))
}

#[test]
fn the_template_is_cfn_lint_clean() {
    let lint =
        cfn_lint().expect("cfn-lint is not installed: run the README test command (bash tests/run.sh)");
    let out = std::process::Command::new(&lint)
        .arg(Path::new("infra/template.yaml"))
        .arg(Path::new("infra/nodes.yaml"))
        .current_dir(root())
        .output()
        .expect("cfn-lint runs");
    assert!(
        out.status.success() && out.stdout.is_empty(),
        "cfn-lint:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Session files are kept 30 days: the files bucket expires `files/` (and only that: transcripts
/// live as long as their sessions), as the file items' TTL does.
#[test]
fn the_files_bucket_expires_session_files_after_thirty_days() {
    let t = template();
    let rules = &resources(&t)["FilesBucket"]["Properties"]["LifecycleConfiguration"]["Rules"];
    let rules = rules.as_sequence().expect("lifecycle rules");
    assert_eq!(rules.len(), 1, "{rules:?}");
    assert_eq!(rules[0]["Status"], "Enabled");
    assert_eq!(str_of(&rules[0]["Prefix"]), "files/");
    assert_eq!(rules[0]["ExpirationInDays"].as_u64(), Some(30));
    assert_eq!(agentplane_domain::file::RETENTION_DAYS, 30);
}

#[test]
fn the_parameters_default_to_aws_and_a_local_deploy_only_overrides_them() {
    let t = template();
    let p = &t["Parameters"];
    let default = |name: &str| str_of(&p[name]["Default"]);
    assert_eq!(default("Architecture"), "arm64");
    assert_eq!(default("StreamingResponses"), "true");
    assert_eq!(default("AwsEndpointUrl"), "", "AWS's own endpoints unless overridden");
    assert_eq!(default("WebhooksAllowedPrivate"), "", "no private webhook target by default");
    assert_eq!(default("PublicUrl"), "", "API Gateway's own domain and stage by default");
    assert_eq!(default("ModelApiKeySecretArn"), "", "the stack makes the model key secret");
    assert_eq!(default("DocumentBuckets"), agentplane_domain::bucket::DEFAULT_PATTERN);
    let stream_s = agentplane_api::app::StreamConfig::default().max_duration.as_secs();
    assert_eq!(default("StreamMaxSeconds"), stream_s.to_string(), "streams last the default length");
    let stream = &resources(&t)["ClientSessionEventsStreamFunction"]["Properties"];
    assert_eq!(
        str_of(&stream["Environment"]["Variables"]["AGENTPLANE_STREAM_MAX_S"]),
        "!Ref StreamMaxSeconds"
    );
    assert_eq!(str_of(&resources(&t)["ModelApiKeySecret"]["Condition"]), "CreateModelApiKeySecret");
    // The deploy script sets exactly the local values, and each is a parameter.
    let script = std::fs::read_to_string(root().join("infra/deploy-local.sh")).expect("deploy-local.sh");
    for name in [
        "Architecture",
        "StreamingResponses",
        "StreamMaxSeconds",
        "ModelBaseUrl",
        "WebhooksAllowedPrivate",
        "AwsEndpointUrl",
    ] {
        assert!(p[name].is_mapping(), "{name} is a parameter");
        assert!(script.contains(&format!("\"{name}=")), "deploy-local.sh sets {name}");
    }
}
