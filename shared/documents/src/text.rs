//! Text gathered up to a byte budget.

/// Text that stops growing at `limit` bytes (cut at a character boundary) and remembers it did.
#[derive(Debug)]
pub(crate) struct Gathered {
    text: String,
    limit: usize,
    cut: bool,
}

impl Gathered {
    pub(crate) fn new(limit: usize) -> Self {
        Self { text: String::new(), limit, cut: false }
    }

    /// Whether no more text is taken.
    pub(crate) fn full(&self) -> bool {
        self.cut
    }

    pub(crate) fn push_str(&mut self, s: &str) {
        if self.cut {
            return;
        }
        let room = self.limit - self.text.len();
        if s.len() <= room {
            self.text.push_str(s);
        } else {
            let mut end = room;
            while !s.is_char_boundary(end) {
                end -= 1;
            }
            self.text.push_str(&s[..end]);
            self.cut = true;
        }
    }

    pub(crate) fn push(&mut self, c: char) {
        let mut buf = [0; 4];
        self.push_str(c.encode_utf8(&mut buf));
    }

    pub(crate) fn ends_with(&self, c: char) -> bool {
        self.text.ends_with(c)
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// The text (trailing whitespace trimmed) and whether it was cut.
    pub(crate) fn finish(mut self) -> (String, bool) {
        let kept = self.text.trim_end().len();
        self.text.truncate(kept);
        (self.text, self.cut)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_is_cut_at_a_character_boundary_within_the_limit() {
        let mut text = Gathered::new(5);
        text.push_str("ab");
        text.push_str("cdé!");
        assert!(text.full());
        text.push_str("more");
        assert_eq!(text.finish(), ("abcd".to_owned(), true));
    }
}
