//! HTML as the model should read it: its text, not its tags. Scripts, styles and comments are
//! dropped, block elements break lines, entities are decoded, runs of whitespace become one.
//! A forgiving scan rather than a parser: the model needs the words, not the tree.

use crate::text::Gathered;
use crate::{Extracted, Limits};

/// Elements whose content is not text for a reader.
const HIDDEN: &[&str] = &["script", "style", "noscript", "template", "svg", "head"];
/// Elements that start a new line.
const BLOCKS: &[&str] = &[
    "address",
    "article",
    "aside",
    "blockquote",
    "br",
    "dd",
    "div",
    "dl",
    "dt",
    "figcaption",
    "figure",
    "footer",
    "form",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
    "header",
    "hr",
    "li",
    "main",
    "nav",
    "ol",
    "p",
    "pre",
    "section",
    "table",
    "tr",
    "ul",
    "title",
];

pub(crate) fn extract(html: &str, limits: &Limits) -> Extracted {
    let mut out = Gathered::new(limits.text_bytes);
    let mut space = false;
    let mut rest = html;
    while !rest.is_empty() && !out.full() {
        let Some(open) = rest.find('<') else {
            text(rest, &mut out, &mut space);
            break;
        };
        text(&rest[..open], &mut out, &mut space);
        rest = &rest[open..];
        if let Some(after) = rest.strip_prefix("<!--") {
            rest = after.find("-->").map_or("", |end| &after[end + 3..]);
            continue;
        }
        let Some(close) = rest.find('>') else { break };
        let tag = &rest[1..close];
        rest = &rest[close + 1..];
        let name: String = tag
            .trim_start_matches('/')
            .chars()
            .take_while(char::is_ascii_alphanumeric)
            .collect::<String>()
            .to_ascii_lowercase();
        if !tag.starts_with('/') && !tag.ends_with('/') && HIDDEN.contains(&name.as_str()) {
            rest = skip_element(rest, &name);
            continue;
        }
        if BLOCKS.contains(&name.as_str()) {
            line_break(&mut out, &mut space);
        } else if matches!(name.as_str(), "td" | "th") && !tag.starts_with('/') {
            space = true;
        }
    }
    let (text, text_cut) = out.finish();
    Extracted { text: text.trim_start().to_owned(), text_cut, ..Extracted::default() }
}

/// What follows the end tag of `name` (the rest of the document when there is none).
fn skip_element<'a>(rest: &'a str, name: &str) -> &'a str {
    let lower = rest.to_ascii_lowercase();
    let end = format!("</{name}");
    match lower.find(&end) {
        Some(at) => rest[at..].find('>').map_or("", |close| &rest[at + close + 1..]),
        None => "",
    }
}

fn line_break(out: &mut Gathered, space: &mut bool) {
    *space = false;
    if !out.is_empty() && !out.ends_with('\n') {
        out.push('\n');
    }
}

/// Text between tags: entities decoded, whitespace runs as one space.
fn text(raw: &str, out: &mut Gathered, space: &mut bool) {
    let decoded = decode_entities(raw);
    for c in decoded.chars() {
        if c.is_whitespace() {
            *space = true;
            continue;
        }
        if *space && !out.is_empty() && !out.ends_with('\n') {
            out.push(' ');
        }
        *space = false;
        out.push(c);
    }
}

fn decode_entities(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut rest = raw;
    while let Some(at) = rest.find('&') {
        out.push_str(&rest[..at]);
        rest = &rest[at..];
        let entity = rest[1..].find(';').filter(|end| *end <= 10).map(|end| &rest[1..=end]);
        match entity.and_then(entity_char) {
            Some(c) => {
                out.push(c);
                rest = &rest[entity.map_or(0, str::len) + 2..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    out
}

fn entity_char(name: &str) -> Option<char> {
    if let Some(number) = name.strip_prefix('#') {
        let code = match number.strip_prefix(['x', 'X']) {
            Some(hex) => u32::from_str_radix(hex, 16).ok()?,
            None => number.parse().ok()?,
        };
        return char::from_u32(code);
    }
    Some(match name {
        "amp" => '&',
        "lt" => '<',
        "gt" => '>',
        "quot" => '"',
        "apos" => '\'',
        "nbsp" => ' ',
        "copy" => '©',
        "reg" => '®',
        "trade" => '™',
        "hellip" => '…',
        "mdash" => '—',
        "ndash" => '–',
        "lsquo" => '‘',
        "rsquo" => '’',
        "ldquo" => '“',
        "rdquo" => '”',
        "euro" => '€',
        "pound" => '£',
        "middot" => '·',
        "bull" => '•',
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(html: &str) -> String {
        extract(html, &Limits::DEFAULT).text
    }

    #[test]
    fn html_gives_its_text_not_its_tags() {
        let page = r#"<!doctype html><html><head><title>T</title><style>p{color:red}</style></head>
            <body><h1>Quarterly&nbsp;report</h1><!-- draft --><p>Sales rose <b>12%</b> &amp; costs
            fell.</p><script>var x = "<p>no</p>";</script><ul><li>one</li><li>two &#8212; &#x41;</li></ul>
            <table><tr><td>a</td><td>b</td></tr></table></body></html>"#;
        assert_eq!(read(page), "Quarterly report\nSales rose 12% & costs fell.\none\ntwo — A\na b");
    }

    #[test]
    fn broken_html_still_gives_text() {
        assert_eq!(read("a &bogus; b < c"), "a &bogus; b");
        assert_eq!(read("<p>open <script>never closed"), "open");
        assert_eq!(read("x &amp"), "x &amp");
    }

    #[test]
    fn html_text_is_cut_at_the_limit() {
        let limits = Limits { text_bytes: 10, ..Limits::DEFAULT };
        let out = extract(&"<p>word</p>".repeat(100), &limits);
        assert!(out.text_cut && out.text.len() <= 10, "{out:?}");
    }
}
