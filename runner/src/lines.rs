//! Lines of an agent's stdout, each capped: a frame longer than the cap ends the agent.

use tokio::io::{AsyncBufRead, AsyncBufReadExt};

/// Read one line (without its newline) into `line`. `Ok(false)` at the end of the stream;
/// an error when a line runs past `cap` bytes.
pub(crate) async fn read_capped<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    cap: usize,
) -> std::io::Result<bool> {
    line.clear();
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(!line.is_empty());
        }
        let (take, done) = match buf.iter().position(|b| *b == b'\n') {
            Some(at) => (at + 1, true),
            None => (buf.len(), false),
        };
        let body = if done { take - 1 } else { take };
        if line.len() + body > cap {
            return Err(std::io::Error::other(format!(
                "the agent wrote a line longer than {cap} bytes"
            )));
        }
        line.extend_from_slice(&buf[..body]);
        reader.consume(take);
        if done {
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_split_and_capped() {
        type Case<'a> = (&'a [u8], usize, Result<Vec<&'a str>, ()>);
        let cases: [Case; 4] = [
            (b"a\nbc\n", 8, Ok(vec!["a", "bc"])),
            (b"a\nlast", 8, Ok(vec!["a", "last"])),
            (b"", 8, Ok(vec![])),
            (b"toolong\n", 3, Err(())),
        ];
        for (input, cap, want) in cases {
            let mut reader = tokio::io::BufReader::with_capacity(2, input);
            let mut line = Vec::new();
            let mut got = Vec::new();
            let outcome = loop {
                match read_capped(&mut reader, &mut line, cap).await {
                    Ok(true) => got.push(String::from_utf8(line.clone()).unwrap()),
                    Ok(false) => break Ok(got),
                    Err(_) => break Err(()),
                }
            };
            let want = want.map(|w| w.into_iter().map(str::to_owned).collect::<Vec<_>>());
            assert_eq!(outcome, want, "{input:?}");
        }
    }
}
