//! The agent engine: the model client, the tool registry, the event bus and the turn loop. The
//! synchronous Responses route and (later) the background runner share it.

pub mod bus;
pub mod conversation;
pub mod model;
pub mod runtime;
pub mod tools;
pub mod turn;

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use agentplane_domain::Timestamp;
use agentplane_domain::pricing::PriceTable;
use agentplane_store::Store;

pub use bus::EventBus;
pub use model::{ModelClient, ModelConfig};
pub use tools::ToolRegistry;
pub use turn::{TurnError, TurnOutcome, TurnRequest};

#[derive(Debug, Clone)]
pub struct Engine {
    pub store: Store,
    pub model: ModelClient,
    pub tools: Arc<ToolRegistry>,
    pub prices: Arc<PriceTable>,
    pub bus: EventBus,
}

impl Engine {
    pub fn new(store: Store, model: ModelConfig, prices: PriceTable, bus: EventBus) -> Self {
        Self {
            store,
            model: ModelClient::new(model),
            tools: Arc::new(ToolRegistry::builtin()),
            prices: Arc::new(prices),
            bus,
        }
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

/// `N` random bytes as lowercase hex.
pub(crate) fn random_hex<const N: usize>() -> String {
    let mut buf = [0u8; N];
    if getrandom::fill(&mut buf).is_err() {
        // Turn ids need uniqueness, not secrecy: fall back to the clock.
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0);
        return format!("{nanos:x}");
    }
    buf.iter().map(|b| format!("{b:02x}")).collect()
}
