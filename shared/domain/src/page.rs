//! Keyset pagination over (creation time, id): the page request and the sort key it walks.

use crate::query::Query;
use crate::{Timestamp, ValidationError};

/// Page size: 1..=100, default 20.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageLimit(u16);

impl PageLimit {
    pub const MAX: u16 = 100;
    pub const DEFAULT: PageLimit = PageLimit(20);

    pub fn new(n: i64) -> Result<Self, ValidationError> {
        if (1..=i64::from(Self::MAX)).contains(&n) {
            Ok(Self(n as u16))
        } else {
            Err(ValidationError::new("limit", "`limit` must be an integer from 1 to 100"))
        }
    }

    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        // Digits only: no sign, no spaces, no "1e2".
        if text.is_empty() || text.len() > 3 || !text.bytes().all(|b| b.is_ascii_digit()) {
            return Err(ValidationError::new("limit", "`limit` must be an integer from 1 to 100"));
        }
        Self::new(text.parse::<i64>().unwrap_or(0))
    }

    pub fn get(self) -> usize {
        usize::from(self.0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Order {
    Asc,
    #[default]
    Desc,
}

impl Order {
    pub fn parse(text: &str) -> Result<Self, ValidationError> {
        match text {
            "asc" => Ok(Self::Asc),
            "desc" => Ok(Self::Desc),
            _ => Err(ValidationError::new("order", "`order` must be `asc` or `desc`")),
        }
    }
}

/// `after`, `limit` and `order`, validated. `after` stays text: the caller parses it as the id
/// type of its list and answers an unknown or malformed cursor with 404.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PageRequest {
    pub after: Option<String>,
    pub limit: PageLimit,
    pub order: Order,
}

impl PageRequest {
    pub fn from_query(query: &Query) -> Result<Self, ValidationError> {
        let limit = match query.single("limit")? {
            Some(text) => PageLimit::parse(text)?,
            None => PageLimit::DEFAULT,
        };
        let order = match query.single("order")? {
            Some(text) => Order::parse(text)?,
            None => Order::default(),
        };
        let after = query.single("after")?.map(str::to_owned);
        Ok(Self { after, limit, order })
    }
}

/// The sort key of an item in a (creation time, id) list. Zero-padded so that string order is
/// time order; the id breaks ties between items created in the same millisecond.
pub fn created_sort_key(created_at: Timestamp, id: &impl std::fmt::Display) -> String {
    format!("{:015}#{id}", created_at.unix_millis().max(0))
}

/// One page of results, in the order requested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub has_more: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn limit_bounds() {
        assert!(PageLimit::parse("0").is_err());
        assert!(PageLimit::parse("101").is_err());
        assert!(PageLimit::parse("-1").is_err());
        assert!(PageLimit::parse("1.5").is_err());
        assert!(PageLimit::parse(" 5").is_err());
        assert_eq!(PageLimit::parse("100").map(PageLimit::get), Ok(100));
        assert_eq!(PageLimit::parse("1").map(PageLimit::get), Ok(1));
    }

    #[test]
    fn defaults_are_twenty_and_desc() {
        let page = PageRequest::from_query(&Query::parse(None)).expect("valid");
        assert_eq!(page.limit.get(), 20);
        assert_eq!(page.order, Order::Desc);
        assert_eq!(page.after, None);
    }

    #[test]
    fn bad_order_and_repeats_are_refused() {
        assert!(PageRequest::from_query(&Query::parse(Some("order=up"))).is_err());
        assert!(PageRequest::from_query(&Query::parse(Some("after=a&after=b"))).is_err());
    }

    proptest! {
        #[test]
        fn sort_keys_order_like_creation_times(a in 0i64..4_000_000_000_000, b in 0i64..4_000_000_000_000) {
            let ka = created_sort_key(Timestamp::from_unix_millis(a), &"x");
            let kb = created_sort_key(Timestamp::from_unix_millis(b), &"x");
            prop_assert_eq!(a.cmp(&b), ka.cmp(&kb));
        }
    }
}
