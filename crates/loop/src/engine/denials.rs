//! The permission denials of a conversation, reported in every turn's result.

use gyre_tools::PermissionDenial;

/// Every tool call the permission policy denied in this session, in order.
#[derive(Debug, Clone, Default)]
pub(super) struct Denials(Vec<PermissionDenial>);

impl Denials {
    pub(super) fn record(&mut self, denial: PermissionDenial) {
        self.0.push(denial);
    }

    pub(super) fn all(&self) -> &[PermissionDenial] {
        &self.0
    }
}
