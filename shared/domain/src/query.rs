//! Query strings as the client sent them: every pair kept, so repeated parameters can be refused.

use crate::ValidationError;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

impl Query {
    pub fn parse(raw: Option<&str>) -> Self {
        let pairs =
            raw.map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default();
        Self { pairs }
    }

    pub fn is_empty(&self) -> bool {
        self.pairs.is_empty()
    }

    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.pairs.iter().map(|(k, _)| k.as_str())
    }

    /// The one value of `name`; a parameter given twice is an error, never a silent pick.
    pub fn single(&self, name: &str) -> Result<Option<&str>, ValidationError> {
        let mut values = self.pairs.iter().filter(|(k, _)| k == name).map(|(_, v)| v.as_str());
        let first = values.next();
        if values.next().is_some() {
            return Err(ValidationError::new(name, format!("`{name}` may be given at most once")));
        }
        Ok(first)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeated_parameters_are_refused() {
        let q = Query::parse(Some("limit=1&limit=2"));
        assert!(q.single("limit").is_err());
        assert_eq!(q.single("order"), Ok(None));
    }

    #[test]
    fn values_are_percent_decoded() {
        let q = Query::parse(Some("after=a%2Fb"));
        assert_eq!(q.single("after"), Ok(Some("a/b")));
    }
}
