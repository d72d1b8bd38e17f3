//! The agent engine: the model client, the tool registry, the event bus and the turn loop. The
//! synchronous Responses route and (later) the background runner share it.

pub mod actions;
pub mod admission;
pub mod agents;
pub mod background;
pub mod background_sweep;
pub mod buckets;
pub mod bus;
pub mod chat;
pub mod compute;
pub mod continuation;
pub mod dispatch;
pub mod envd_token;
pub mod environment_purge;
pub mod feedback;
pub mod files;
pub mod images;
pub mod model;
mod model_stream;
pub mod node_report;
pub mod nodes;
pub mod platform;
pub mod ports;
pub mod processes;
pub mod random;
pub mod retention_sweep;
pub mod run_content_retention;
pub mod runs;
pub mod runtime;
pub mod sandboxes;
pub mod session_purge;
pub mod sessions;
pub mod side_call;
pub mod sweep_limits;
pub mod tenant_resume;
pub mod tenants;
pub mod titles;
pub mod tools;
pub mod transcript;
pub mod turn;
pub mod webhooks;
pub mod workspace_sweep;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use agentplane_domain::Timestamp;
use agentplane_domain::pricing::PriceTable;

pub use bus::EventBus;
pub use model::{ModelClient, ModelConfig};
pub use tools::ToolRegistry;
pub use turn::{Replay, TurnContext, TurnError, TurnOutcome, TurnRequest};

/// The engine over its ports: `S` keeps sessions, their transcripts and event logs (see
/// [`ports`]), `M` is
/// the model. The deployed one is `TurnEngine<Store, ModelClient>` (the store crate implements the ports).
#[derive(Debug, Clone)]
pub struct TurnEngine<S, M> {
    pub store: S,
    pub model: M,
    pub tools: Arc<ToolRegistry>,
    pub prices: Arc<PriceTable>,
    pub bus: EventBus,
    /// Session images for `view_image` (none: the tool is not offered).
    pub images: Option<Arc<dyn images::ImageSource>>,
    /// Where the turns this engine runs report each event they commit, as they commit it (a
    /// route that streams the turn in its own dialect); `None`: nobody watches.
    pub watch: Option<Watcher>,
}

/// Who watches a turn: where its reports go, and whether the model's text is streamed to it
/// as it arrives (else only committed events are sent).
#[derive(Debug, Clone)]
pub struct Watcher {
    pub sink: TurnWatch,
    pub text: bool,
}

/// What a watched turn reports: the events it commits, in the log's order, as each step commits
/// them, and the model's text as it arrives. The log stays the durable record: a watcher that
/// goes away loses nothing but its view.
pub type TurnWatch = tokio::sync::mpsc::UnboundedSender<Watched>;

/// One report of a watched turn.
#[derive(Debug, Clone, PartialEq)]
pub enum Watched {
    /// An event the turn committed.
    Committed(agentplane_domain::event::Event),
    /// A piece of the model's text, before its step commits: the event that will hold the
    /// text (an `assistant.message`, or the step's first `tool.call`) gets log position `seq`.
    Text { seq: u64, delta: String },
}

impl<S> TurnEngine<S, ModelClient> {
    pub fn new(store: S, model: ModelConfig, prices: PriceTable, bus: EventBus) -> Self {
        Self::with_model(store, ModelClient::new(model), prices, bus)
    }
}

impl<S, M> TurnEngine<S, M> {
    /// An engine over any model (the built-in tools).
    pub fn with_model(store: S, model: M, prices: PriceTable, bus: EventBus) -> Self {
        Self {
            store,
            model,
            tools: Arc::new(ToolRegistry::builtin()),
            prices: Arc::new(prices),
            bus,
            images: None,
            watch: None,
        }
    }

    /// This engine, with every event its turns commit sent to `sink` as well, and (`text`)
    /// the model's text as it arrives.
    pub fn watched(&self, sink: TurnWatch, text: bool) -> Self
    where
        S: Clone,
        M: Clone,
    {
        Self { watch: Some(Watcher { sink, text }), ..self.clone() }
    }

    fn now(&self) -> Timestamp {
        now()
    }
}

/// The wall clock, read at the edge (the domain never reads it). Every crate above the domain
/// takes its time from here.
pub fn now() -> Timestamp {
    let ms = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis()).unwrap_or(0);
    Timestamp::from_unix_millis(i64::try_from(ms).unwrap_or(i64::MAX))
}

/// The built-in price table, extended by `AGENTPLANE_PRICES_FILE` when it is set (JSON: model →
/// {input_per_million, output_per_million}; a model it names replaces the built-in price).
pub fn prices_from_env() -> Result<PriceTable, String> {
    match std::env::var("AGENTPLANE_PRICES_FILE") {
        Ok(path) => {
            let text = std::fs::read_to_string(&path).map_err(|e| format!("reading {path}: {e}"))?;
            let file = PriceTable::from_json(&text).map_err(|e| format!("parsing {path}: {e}"))?;
            Ok(PriceTable::default().extended_by(file))
        }
        Err(_) => Ok(PriceTable::default()),
    }
}
