//! A node's token rotation and enrollment.

use super::*;

/// A rotated node token: the new one, and until when the one the request carried is still
/// accepted.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct RotatedNodeTokenBody {
    pub node_id: String,
    /// The new node token (`apnode_…`): in this answer only. Save it before using it.
    pub token: String,
    /// Unix seconds: the token the request carried is refused from then on.
    pub previous_token_expires_at: i64,
}

/// An enrollment: the name the node is known by (an EC2 instance id, a hostname).
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnrollNode {
    /// 1 to 128 characters, not only whitespace. One node per name: enrolling a name again
    /// reissues that node's token.
    #[schema(min_length = 1, max_length = 128)]
    pub name: String,
}
