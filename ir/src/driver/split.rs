//! `--split-input-file`: cuts the input at marker lines (`// -----`) into chunks processed as
//! separate files. Each chunk is prefixed with as many newlines as precede it in the input, so
//! every line keeps its original number in diagnostics and `expected-*` designators.

/// One chunk: its bytes, padded with the newlines that precede it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chunk {
    pub bytes: Vec<u8>,
}

/// Whether `line` is a split marker: the marker, optionally followed by more dashes, with only
/// whitespace around it.
fn is_marker(line: &[u8], marker: &[u8]) -> bool {
    let trimmed = line.trim_ascii();
    trimmed
        .strip_prefix(marker)
        .is_some_and(|rest| rest.iter().all(|&b| b == b'-'))
}

/// Splits `input` at marker lines; without a marker, returns the whole input as one chunk.
pub fn split_input(input: &[u8], marker: &str) -> Vec<Chunk> {
    let marker = marker.as_bytes();
    let mut chunks = Vec::new();
    let mut start = 0usize;
    let mut start_line = 0usize;
    let mut line_no = 0usize;
    let mut pos = 0usize;
    while pos < input.len() {
        let end = input[pos..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(input.len(), |i| pos + i);
        if !marker.is_empty() && is_marker(&input[pos..end], marker) {
            chunks.push(padded(&input[start..pos], start_line));
            start = (end + 1).min(input.len());
            start_line = line_no + 1;
        }
        pos = end + 1;
        line_no += 1;
    }
    chunks.push(padded(&input[start.min(input.len())..], start_line));
    chunks
}

fn padded(body: &[u8], lines_before: usize) -> Chunk {
    let mut bytes = vec![b'\n'; lines_before];
    bytes.extend_from_slice(body);
    Chunk { bytes }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_and_pads() {
        let c = split_input(b"a\nb\n// -----\nc\n  // -------  \nd", "// -----");
        let texts: Vec<_> = c
            .iter()
            .map(|c| String::from_utf8(c.bytes.clone()).unwrap())
            .collect();
        assert_eq!(texts, ["a\nb\n", "\n\n\nc\n", "\n\n\n\n\nd"]);
    }

    #[test]
    fn no_marker_is_one_chunk() {
        assert_eq!(
            split_input(b"x\n", "// -----"),
            vec![Chunk {
                bytes: b"x\n".to_vec()
            }]
        );
        assert_eq!(split_input(b"", "// -----").len(), 1);
        // Marker-like text that is not alone on its line does not split.
        assert_eq!(split_input(b"x // ----- y\n", "// -----").len(), 1);
    }
}
