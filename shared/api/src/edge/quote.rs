//! Error messages may quote what a client sent, but never all of it: a quoted value is cut to
//! `MAX_QUOTE_CHARS` characters with an ellipsis, and a whole message to `MAX_MESSAGE_CHARS`.

/// The most characters of one quoted value an error message repeats.
pub const MAX_QUOTE_CHARS: usize = 64;
/// The most characters of an error message.
pub const MAX_MESSAGE_CHARS: usize = 512;

/// `text`, cut to `MAX_QUOTE_CHARS` characters with `…` when longer.
pub fn quote(text: &str) -> String {
    cut(text, MAX_QUOTE_CHARS)
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// `message` with every `` `quoted` `` or `"quoted"` value cut by `quote`, then the whole
/// message cut to `MAX_MESSAGE_CHARS`.
pub fn cap_message(message: &str) -> String {
    let mut out = String::with_capacity(message.len().min(MAX_MESSAGE_CHARS + 8));
    let mut rest = message;
    while let Some(open) = rest.find(['`', '"']) {
        let mark = &rest[open..open + 1];
        out.push_str(&rest[..open + 1]);
        rest = &rest[open + 1..];
        match rest.find(mark) {
            Some(close) => {
                out.push_str(&quote(&rest[..close]));
                out.push_str(mark);
                rest = &rest[close + 1..];
            }
            // An unclosed quote runs to the end: it is quoted input too.
            None => {
                out.push_str(&quote(rest));
                rest = "";
            }
        }
    }
    out.push_str(rest);
    cut(&out, MAX_MESSAGE_CHARS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_values_are_kept_and_long_ones_cut_with_an_ellipsis() {
        assert_eq!(quote("abc"), "abc");
        let long = "x".repeat(10_000);
        let cut = quote(&long);
        assert_eq!(cut.chars().count(), MAX_QUOTE_CHARS + 1);
        assert!(cut.ends_with('…'));
        assert_eq!(quote(&"é".repeat(100)).chars().count(), MAX_QUOTE_CHARS + 1);
    }

    #[test]
    fn quoted_values_in_messages_are_cut_and_the_rest_kept() {
        let long = "y".repeat(10_000);
        let message = cap_message(&format!("unknown tool `{long}`; known: echo, add"));
        assert!(message.starts_with("unknown tool `yyyy"), "{message}");
        assert!(message.ends_with("…`; known: echo, add"), "{message}");
        assert!(message.len() < 200);
        let message = cap_message(&format!("invalid type: string \"{long}\", expected u64"));
        assert!(message.ends_with("…\", expected u64"), "{message}");
        assert_eq!(cap_message("`a` may be given at most once"), "`a` may be given at most once");
    }

    #[test]
    fn unquoted_or_unclosed_input_is_bounded_too() {
        let long = "z".repeat(10_000);
        assert!(cap_message(&format!("agent {long} not found")).chars().count() <= MAX_MESSAGE_CHARS + 1);
        assert!(cap_message(&format!("bad `{long}")).chars().count() <= MAX_QUOTE_CHARS + 8);
    }
}
