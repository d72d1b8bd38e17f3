//! `openapi/platform.json` says of a Run what the spec says (shared/spec/runs-stop-rollback-api.md,
//! transcribed in `tests/spec/runs-stop-rollback.schema.json`): the same fields at every level,
//! every field the spec requires required, `null` allowed exactly where the spec allows it
//! (`usage.serviceFeePercent`; every other optional field is omitted, never `null`), the same
//! enums (`serviceFeePercent` 0|5|10|15, `provider`), and `usage.calls[]` a typed object rather
//! than any JSON. The checked-in document is the code's (`openapi::tests` compares them).

use std::collections::BTreeSet;
use std::path::PathBuf;

use serde_json::Value;

type R = anyhow::Result<()>;

fn read(path: &str) -> anyhow::Result<Value> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path);
    Ok(serde_json::from_str(&std::fs::read_to_string(&path)?)?)
}

/// `schema` with its `$ref` followed; `nullable` when it (or the `oneOf` around it) allows null.
fn resolve<'a>(doc: &'a Value, schema: &'a Value) -> (&'a Value, bool) {
    if let Some(reference) = schema.get("$ref").and_then(Value::as_str) {
        let name = reference.trim_start_matches("#/components/schemas/");
        return resolve(doc, &doc["components"]["schemas"][name]);
    }
    if let Some(options) = schema.get("oneOf").and_then(Value::as_array) {
        let null = options.iter().any(|o| o["type"] == "null");
        let rest: Vec<&Value> = options.iter().filter(|o| o["type"] != "null").collect();
        if rest.len() == 1 {
            let (inner, nullable) = resolve(doc, rest[0]);
            return (inner, nullable || null);
        }
    }
    let nullable = match &schema["type"] {
        Value::Array(types) => types.iter().any(|t| t == "null"),
        other => other == "null",
    } || schema["enum"].as_array().is_some_and(|e| e.contains(&Value::Null));
    (schema, nullable)
}

fn spec_nullable(schema: &Value) -> bool {
    resolve(&Value::Null, schema).1
}

fn names(object: &Value, key: &str) -> BTreeSet<String> {
    match &object[key] {
        Value::Array(items) => items.iter().filter_map(Value::as_str).map(str::to_owned).collect(),
        Value::Object(map) => map.keys().cloned().collect(),
        _ => BTreeSet::new(),
    }
}

fn enum_of(schema: &Value) -> Option<BTreeSet<String>> {
    schema["enum"].as_array().map(|e| e.iter().filter(|v| !v.is_null()).map(Value::to_string).collect())
}

/// Every way the code's schema `code` (in `doc`) departs from the spec's `spec`, at `at`.
fn compare(doc: &Value, spec: &Value, code: &Value, at: &str, out: &mut Vec<String>) {
    let (code, _) = resolve(doc, code);
    if let Some(want) = enum_of(spec) {
        let got = enum_of(code).unwrap_or_default();
        if want != got {
            out.push(format!("{at}: enum {got:?}, the spec's {want:?}"));
        }
    }
    if spec["type"] == "array" && spec["items"].get("properties").is_some() {
        let items = &code["items"];
        if resolve(doc, items).0.get("properties").is_none() {
            out.push(format!("{at}[]: an untyped item ({items}), the spec's an object of fixed fields"));
            return;
        }
        compare(doc, &spec["items"], items, &format!("{at}[]"), out);
        return;
    }
    let Some(spec_props) = spec["properties"].as_object() else { return };
    let code_props = names(code, "properties");
    let spec_names: BTreeSet<String> = spec_props.keys().cloned().collect();
    if code_props != spec_names {
        out.push(format!("{at}: fields {code_props:?}, the spec's {spec_names:?}"));
    }
    let required = names(code, "required");
    for name in names(spec, "required") {
        if !required.contains(&name) {
            out.push(format!("{at}.{name}: optional, the spec requires it"));
        }
    }
    if code["additionalProperties"] != false {
        out.push(format!("{at}: extra fields allowed, the spec rejects them"));
    }
    for (name, spec_field) in spec_props {
        let Some(code_field) = code["properties"].get(name) else { continue };
        let (_, nullable) = resolve(doc, code_field);
        let want = spec_nullable(spec_field);
        if nullable != want {
            out.push(format!("{at}.{name}: nullable {nullable}, the spec's {want}"));
        }
        compare(doc, spec_field, code_field, &format!("{at}.{name}"), out);
    }
}

#[test]
fn the_platform_document_describes_runs_as_the_spec_does() -> R {
    let doc = read("../openapi/platform.json")?;
    let spec = read("spec/runs-stop-rollback.schema.json")?;
    let mut out = Vec::new();
    for (shape, schema) in [("getRun", "Data_RunDetails"), ("runAction", "Data_RunState")] {
        let code = &doc["components"]["schemas"][schema];
        anyhow::ensure!(code.is_object(), "openapi/platform.json has no {schema}");
        compare(&doc, &spec[shape], code, shape, &mut out);
    }
    anyhow::ensure!(out.is_empty(), "openapi/platform.json departs from the spec:\n{}", out.join("\n"));
    Ok(())
}

/// No response schema of the document allows `null` except where the spec does: an optional
/// field is left out of the answer, so a client generated from the document never expects null.
#[test]
fn no_platform_answer_field_is_nullable_but_the_fee_percent() -> R {
    let doc = read("../openapi/platform.json")?;
    let requests: BTreeSet<&str> = ["CreateEnvironment", "CreateSession", "CreateRun"].into();
    let mut nullable = Vec::new();
    for (name, schema) in doc["components"]["schemas"].as_object().into_iter().flatten() {
        if requests.contains(name.as_str()) {
            continue;
        }
        for (field, value) in schema["properties"].as_object().into_iter().flatten() {
            if resolve(&doc, value).1 && !(name == "UsageBody" && field == "serviceFeePercent") {
                nullable.push(format!("{name}.{field}"));
            }
        }
    }
    anyhow::ensure!(nullable.is_empty(), "nullable answer fields: {nullable:?}");
    Ok(())
}

/// Every GET of the surface documents its 400 (an unknown query parameter), as the spec's GET
/// Run does.
#[test]
fn every_platform_get_documents_its_400() -> R {
    let doc = read("../openapi/platform.json")?;
    let mut missing = Vec::new();
    for (path, item) in doc["paths"].as_object().into_iter().flatten() {
        if let Some(get) = item.get("get")
            && get["responses"].get("400").is_none()
        {
            missing.push(path.clone());
        }
    }
    anyhow::ensure!(missing.is_empty(), "GETs without a 400: {missing:?}");
    Ok(())
}
