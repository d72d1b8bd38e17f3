//! How much one pass of a sweep reads: pages of [`PAGE`] items, at most [`MAX_PAGES`] pages a
//! pass; the rest waits for the next pass.

pub const PAGE: usize = 100;
pub const MAX_PAGES: usize = 10;
