//! envd's messages (`process.proto`, `filesystem.proto` of E2B's published protocol) in
//! protobuf's canonical JSON form: camelCase names (the proto names accepted too), `bytes` as
//! base64, `int64` as a string, enums by name, a oneof as whichever field is present. Unknown
//! fields are ignored, as the SDK's own codec does.

use std::collections::BTreeMap;

use base64::Engine;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// `bytes` in proto JSON: standard base64 (URL-safe accepted on the way in).
pub mod b64 {
    use super::*;

    pub fn serialize<S: Serializer>(bytes: &[u8], s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(bytes))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Vec<u8>, D::Error> {
        let text = String::deserialize(d)?;
        let trimmed = text.trim_end_matches('=');
        base64::engine::general_purpose::STANDARD_NO_PAD
            .decode(trimmed)
            .or_else(|_| base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(trimmed))
            .map_err(serde::de::Error::custom)
    }
}

// ---- process.Process ----

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct ProcessConfig {
    pub cmd: String,
    pub args: Vec<String>,
    pub envs: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cwd: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct StartRequest {
    pub process: ProcessConfig,
    pub pty: Option<serde_json::Value>,
    pub tag: Option<String>,
    /// Absent: true (older SDKs), as the protocol says.
    pub stdin: Option<bool>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ProcessSelector {
    pub pid: Option<u32>,
    pub tag: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ConnectRequest {
    pub process: ProcessSelector,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct ProcessInput {
    #[serde(with = "opt_b64")]
    pub stdin: Option<Vec<u8>>,
    #[serde(with = "opt_b64")]
    pub pty: Option<Vec<u8>>,
}

/// An optional `bytes` field.
mod opt_b64 {
    use super::*;

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<u8>>, D::Error> {
        #[derive(Deserialize)]
        struct Wrap(#[serde(with = "b64")] Vec<u8>);
        Option::<Wrap>::deserialize(d).map(|w| w.map(|Wrap(b)| b))
    }
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SendInputRequest {
    pub process: ProcessSelector,
    pub input: ProcessInput,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct SendSignalRequest {
    pub process: ProcessSelector,
    pub signal: Option<SignalName>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct CloseStdinRequest {
    pub process: ProcessSelector,
}

/// `process.Signal`, by name or number.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum SignalName {
    Name(String),
    Number(i32),
}

impl SignalName {
    /// SIGTERM or SIGKILL; anything else is not a signal envd sends.
    pub fn signal(&self) -> Option<rustix::process::Signal> {
        match self {
            Self::Name(n) if n == "SIGNAL_SIGKILL" => Some(rustix::process::Signal::KILL),
            Self::Name(n) if n == "SIGNAL_SIGTERM" => Some(rustix::process::Signal::TERM),
            Self::Number(9) => Some(rustix::process::Signal::KILL),
            Self::Number(15) => Some(rustix::process::Signal::TERM),
            _ => None,
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct ProcessInfo {
    pub config: ProcessConfig,
    pub pid: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tag: Option<String>,
}

#[derive(Debug, Clone, Serialize)]
pub struct ListResponse {
    pub processes: Vec<ProcessInfo>,
}

/// `{}`: the empty answers (`SendInputResponse`, `SendSignalResponse`, …).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Empty {}

/// `StartResponse` and `ConnectResponse` alike: `{event: ProcessEvent}`.
#[derive(Debug, Clone, Serialize)]
pub struct EventResponse {
    pub event: ProcessEvent,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum ProcessEvent {
    Start { pid: u32 },
    Data(DataEvent),
    End(EndEvent),
    Keepalive {},
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum DataEvent {
    Stdout(#[serde(with = "b64")] Vec<u8>),
    Stderr(#[serde(with = "b64")] Vec<u8>),
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EndEvent {
    pub exit_code: i32,
    pub exited: bool,
    pub status: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

// ---- filesystem.Filesystem ----

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct PathRequest {
    pub path: String,
    pub depth: Option<u32>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default)]
pub struct MoveRequest {
    pub source: String,
    pub destination: String,
}

#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct EntryInfo {
    pub name: String,
    /// `FILE_TYPE_FILE`, `FILE_TYPE_DIRECTORY`, `FILE_TYPE_SYMLINK`, `FILE_TYPE_UNSPECIFIED`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub path: String,
    /// int64: a string in proto JSON.
    #[serde(serialize_with = "as_string")]
    pub size: u64,
    pub mode: u32,
    pub permissions: String,
    pub owner: String,
    pub group: String,
    /// RFC 3339.
    pub modified_time: String,
}

fn as_string<S: Serializer>(n: &u64, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&n.to_string())
}

/// `{entry: EntryInfo}`: `StatResponse`, `MakeDirResponse`, `MoveResponse`.
#[derive(Debug, Clone, Serialize)]
pub struct EntryResponse {
    pub entry: EntryInfo,
}

#[derive(Debug, Clone, Serialize)]
pub struct ListDirResponse {
    pub entries: Vec<EntryInfo>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_render_as_proto_json() {
        let start =
            serde_json::to_value(EventResponse { event: ProcessEvent::Start { pid: 2 } }).expect("json");
        assert_eq!(start, serde_json::json!({"event": {"start": {"pid": 2}}}));
        let data = EventResponse { event: ProcessEvent::Data(DataEvent::Stdout(b"hi\n".to_vec())) };
        assert_eq!(
            serde_json::to_value(data).expect("json"),
            serde_json::json!({"event": {"data": {"stdout": "aGkK"}}})
        );
        let end = EventResponse {
            event: ProcessEvent::End(EndEvent {
                exit_code: 3,
                exited: true,
                status: "exit status 3".into(),
                error: None,
            }),
        };
        assert_eq!(
            serde_json::to_value(end).expect("json"),
            serde_json::json!({"event": {"end": {"exitCode": 3, "exited": true, "status": "exit status 3"}}})
        );
        let input: SendInputRequest =
            serde_json::from_str(r#"{"process":{"pid":4},"input":{"stdin":"aGk="}}"#).expect("parse");
        assert_eq!(input.input.stdin.as_deref(), Some(b"hi".as_slice()));
        let signal: SendSignalRequest =
            serde_json::from_str(r#"{"process":{"tag":"t"},"signal":"SIGNAL_SIGKILL"}"#).expect("parse");
        assert_eq!(signal.signal.and_then(|s| s.signal()), Some(rustix::process::Signal::KILL));
    }
}
