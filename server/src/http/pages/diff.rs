//! A line diff between two plan revisions: longest common subsequence over the lines that
//! differ after the common head and tail are set aside.

/// One line of a diff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Line {
    Same(String),
    Added(String),
    Removed(String),
}

impl Line {
    /// The marker column: ` `, `+` or `-`.
    pub fn sign(&self) -> &'static str {
        match self {
            Line::Same(_) => " ",
            Line::Added(_) => "+",
            Line::Removed(_) => "-",
        }
    }

    /// A CSS class for the line.
    pub fn class(&self) -> &'static str {
        match self {
            Line::Same(_) => "same",
            Line::Added(_) => "add",
            Line::Removed(_) => "del",
        }
    }

    /// The line's text.
    pub fn text(&self) -> &str {
        match self {
            Line::Same(t) | Line::Added(t) | Line::Removed(t) => t,
        }
    }
}

/// Largest LCS table (cells) before the diff falls back to "all removed, all added".
const MAX_CELLS: usize = 4_000_000;

/// Diff `old` against `new`, line by line.
pub fn diff(old: &str, new: &str) -> Vec<Line> {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let head = a.iter().zip(&b).take_while(|(x, y)| x == y).count();
    let tail = a[head..]
        .iter()
        .rev()
        .zip(b[head..].iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    let (mid_a, mid_b) = (&a[head..a.len() - tail], &b[head..b.len() - tail]);
    let mut out: Vec<Line> = a[..head]
        .iter()
        .map(|l| Line::Same((*l).to_owned()))
        .collect();
    out.extend(middle(mid_a, mid_b));
    out.extend(
        a[a.len() - tail..]
            .iter()
            .map(|l| Line::Same((*l).to_owned())),
    );
    out
}

fn middle(a: &[&str], b: &[&str]) -> Vec<Line> {
    let (n, m) = (a.len(), b.len());
    if n.saturating_mul(m) > MAX_CELLS {
        let removed = a.iter().map(|l| Line::Removed((*l).to_owned()));
        return removed
            .chain(b.iter().map(|l| Line::Added((*l).to_owned())))
            .collect();
    }
    // lcs[i][j]: LCS length of a[i..] and b[j..].
    let width = m + 1;
    let mut lcs = vec![0_u32; (n + 1) * width];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            lcs[i * width + j] = if a[i] == b[j] {
                lcs[(i + 1) * width + j + 1] + 1
            } else {
                lcs[(i + 1) * width + j].max(lcs[i * width + j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, Vec::with_capacity(n + m));
    while i < n || j < m {
        if i < n && j < m && a[i] == b[j] {
            out.push(Line::Same(a[i].to_owned()));
            (i, j) = (i + 1, j + 1);
        } else if i < n && (j == m || lcs[(i + 1) * width + j] >= lcs[i * width + j + 1]) {
            out.push(Line::Removed(a[i].to_owned()));
            i += 1;
        } else {
            out.push(Line::Added(b[j].to_owned()));
            j += 1;
        }
    }
    out
}

/// Lines added and removed.
pub fn stats(lines: &[Line]) -> (usize, usize) {
    lines.iter().fold((0, 0), |(add, del), l| match l {
        Line::Added(_) => (add + 1, del),
        Line::Removed(_) => (add, del + 1),
        Line::Same(_) => (add, del),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(lines: &[Line]) -> String {
        lines
            .iter()
            .map(|l| format!("{}{}\n", l.sign(), l.text()))
            .collect()
    }

    #[test]
    fn diffs_are_minimal_and_ordered() {
        let cases = [
            ("a\nb\nc", "a\nb\nc", " a\n b\n c\n"),
            ("a\nb\nc", "a\nx\nc", " a\n-b\n+x\n c\n"),
            ("", "a", "+a\n"),
            ("a", "", "-a\n"),
            (
                "# P\n1\n2\n3",
                "# P\n1\n2a\n3\n4",
                " # P\n 1\n-2\n+2a\n 3\n+4\n",
            ),
            ("x\na\nb", "a\nb\ny", "-x\n a\n b\n+y\n"),
        ];
        for (old, new, want) in cases {
            assert_eq!(render(&diff(old, new)), want, "{old:?} -> {new:?}");
        }
    }

    #[test]
    fn stats_count_changes_and_results_rebuild_both_sides() {
        let old = "one\ntwo\nthree\nfour";
        let new = "zero\none\nthree\nfive\nfour";
        let lines = diff(old, new);
        assert_eq!(stats(&lines), (2, 1));
        let side = |keep: fn(&Line) -> bool| {
            lines
                .iter()
                .filter(|l| keep(l))
                .map(Line::text)
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(side(|l| !matches!(l, Line::Added(_))), old);
        assert_eq!(side(|l| !matches!(l, Line::Removed(_))), new);
    }
}
