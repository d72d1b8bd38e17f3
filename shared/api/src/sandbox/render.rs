//! The sandbox API's wire shapes: camelCase, times in RFC 3339 UTC, output timestamps in Unix
//! milliseconds, output data in base64.

use agentplane_domain::Timestamp;
use agentplane_domain::sandbox::{ProcessRecord, Sandbox};
use serde_json::{Value, json};

pub fn sandbox(s: &Sandbox, now: Timestamp) -> Value {
    let state = s.lifecycle.effective(now);
    json!({
        "sandboxID": s.id.as_str(),
        "startedAt": s.started_at.rfc3339(),
        "endAt": s.lifecycle.end_at.rfc3339(),
        "state": state.as_str(),
        "metadata": s.metadata,
        "envVars": s.env_vars,
        "isolation": s.isolation,
    })
}

pub fn process(p: &ProcessRecord) -> Value {
    let mut out = json!({
        "processId": p.id.to_string(),
        "pid": p.pid,
        "config": {
            "cmd": p.config.cmd,
            "args": p.config.args,
            "envs": p.config.envs,
            "cwd": p.config.cwd,
        },
        "startedAt": p.started_at.rfc3339(),
        "state": p.state.as_str(),
        "observed": p.observed,
        "observationGap": p.observation_gap,
        "outputTruncated": p.output_truncated,
    });
    if let Some(tag) = &p.tag {
        out["tag"] = json!(tag);
    }
    if p.observed {
        out["pty"] = json!(p.pty);
    }
    if let Some(at) = p.exited_at {
        out["exitedAt"] = json!(at.rfc3339());
    }
    if let Some(code) = p.exit_code {
        out["exitCode"] = json!(code);
    }
    if let Some(signal) = p.signal {
        out["signal"] = json!(signal);
    }
    out
}
