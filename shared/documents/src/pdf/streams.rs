//! What a PDF's streams inflate to, all together, found by scanning the raw bytes for
//! `stream` keywords (no parsing, so a damaged cross-reference table hides none). A stream
//! whose only filter is FlateDecode is inflated from where its data starts to the end of its
//! deflate data, wherever an `endstream` seems to be; one with other filters (LZW, Brotli,
//! chains) is decoded by lopdf with the bytes up to its `endstream`. Either way each decode is
//! bounded by what is left of the budget, so the scan costs at most the budget.

use std::io::Read;

use lopdf::{Dictionary, Object, Stream};

use crate::DocumentError;

/// The filter names of a stream, read from the dictionary text before its `stream` keyword.
fn filters(dictionary: &[u8]) -> Vec<Vec<u8>> {
    let Some(at) = find(dictionary, b"/Filter") else { return Vec::new() };
    let rest = &dictionary[at + b"/Filter".len()..];
    let rest = rest.strip_prefix(b" ").unwrap_or(rest);
    let list = match rest.iter().position(|b| !b.is_ascii_whitespace()).map(|i| &rest[i..]) {
        Some(list) if list.starts_with(b"[") => {
            &list[1..list.iter().position(|b| *b == b']').unwrap_or(list.len())]
        }
        Some(list) => {
            &list[..list
                .iter()
                .skip(1)
                .position(|b| *b == b'/' || b"<>[]\n\r \t".contains(b))
                .map_or(list.len(), |i| i + 1)]
        }
        None => return Vec::new(),
    };
    list.split(|b| *b == b'/' || b.is_ascii_whitespace())
        .filter(|name| !name.is_empty())
        .map(|name| match name {
            b"Fl" => b"FlateDecode".to_vec(),
            b"LZW" => b"LZWDecode".to_vec(),
            b"A85" => b"ASCII85Decode".to_vec(),
            b"AHx" => b"ASCIIHexDecode".to_vec(),
            b"RL" => b"RunLengthDecode".to_vec(),
            other => other.to_vec(),
        })
        .collect()
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// Fails with [`DocumentError::Inflates`] when the streams of `pdf` inflate past `limit`
/// bytes together.
pub(crate) fn inflated_total(pdf: &[u8], limit: usize) -> Result<usize, DocumentError> {
    let mut total = 0usize;
    let mut from = 0;
    while let Some(at) = find(&pdf[from..], b"stream").map(|i| from + i) {
        from = at + b"stream".len();
        if pdf[..at].ends_with(b"end") {
            continue;
        }
        let data = match &pdf[from..] {
            [b'\r', b'\n', ..] => from + 2,
            [b'\n' | b'\r', ..] => from + 1,
            _ => continue,
        };
        // The dictionary: back to the `obj` that opens it (at most 4 KiB back).
        let start = at.saturating_sub(4096);
        let dictionary = &pdf[start..at];
        let dictionary = match dictionary.windows(3).rposition(|w| w == b"obj") {
            Some(obj) => &dictionary[obj..],
            None => dictionary,
        };
        let end = find(&pdf[data..], b"endstream").map_or(pdf.len(), |i| data + i);
        let left = limit - total;
        let size = match filters(dictionary).as_slice() {
            [] => 0,
            [flate] if flate == b"FlateDecode" => inflate(&pdf[data..], left),
            chain => {
                let names = chain.iter().map(|name| Object::Name(name.clone())).collect();
                let mut dict = Dictionary::new();
                dict.set("Filter", Object::Array(names));
                match Stream::new(dict, pdf[data..end].to_vec()).decompressed_content_with_limit(left) {
                    Ok(content) => content.len(),
                    Err(lopdf::Error::Decompress(lopdf::DecompressError::MemoryLimitExceeded { .. })) => {
                        left + 1
                    }
                    Err(_) => 0,
                }
            }
        };
        if size > left {
            return Err(DocumentError::Inflates { limit });
        }
        total += size;
        from = end.max(from);
    }
    Ok(total)
}

/// How many bytes the zlib (or, failing that, raw deflate) data at the start of `data`
/// inflates to, reading at most `left + 1` of them. Damaged data counts what it gave.
fn inflate(data: &[u8], left: usize) -> usize {
    let count = |reader: &mut dyn Read| {
        let mut bounded = reader.take(left as u64 + 1);
        let mut counted = 0usize;
        let mut buf = [0u8; 16 * 1024];
        loop {
            match bounded.read(&mut buf) {
                Ok(0) | Err(_) => break counted,
                Ok(n) => counted += n,
            }
        }
    };
    let zlib = count(&mut flate2::read::ZlibDecoder::new(data));
    if zlib > 0 {
        return zlib;
    }
    count(&mut flate2::read::DeflateDecoder::new(data))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filter_names_are_read_in_any_spelling() {
        assert_eq!(filters(b"obj << /Length 5 /Filter /FlateDecode >>"), vec![b"FlateDecode".to_vec()]);
        assert_eq!(filters(b"obj<</Filter/Fl/Length 5>>"), vec![b"FlateDecode".to_vec()]);
        assert_eq!(
            filters(b"obj << /Filter [ /ASCII85Decode /LZWDecode ] >>"),
            vec![b"ASCII85Decode".to_vec(), b"LZWDecode".to_vec()]
        );
        assert!(filters(b"obj << /Length 5 >>").is_empty());
    }
}
