//! A plain-text table printer (columns padded, numbers right-aligned) that
//! also renders as Markdown for docs/.

use std::fmt;

/// A table of strings with a header row.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new<S: Into<String>>(headers: impl IntoIterator<Item = S>) -> Table {
        Table {
            headers: headers.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// Appends a row; missing cells are left empty, extra ones dropped.
    pub fn row<S: Into<String>>(&mut self, cells: impl IntoIterator<Item = S>) {
        let mut r: Vec<String> = cells.into_iter().map(Into::into).collect();
        r.resize(self.headers.len(), String::new());
        self.rows.push(r);
    }

    fn widths(&self) -> Vec<usize> {
        let mut w: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate() {
                w[i] = w[i].max(c.chars().count());
            }
        }
        w
    }

    /// Whether every non-empty cell of column `i` reads as a number (then
    /// it is right-aligned).
    fn numeric(&self, i: usize) -> bool {
        self.rows.iter().all(|r| {
            let c = r[i].trim_end_matches(['x', '%']);
            c.is_empty() || c.parse::<f64>().is_ok()
        })
    }

    /// The table as GitHub-flavoured Markdown.
    #[allow(dead_code)] // the binary prints text; the virtual-texturing example prints Markdown
    pub fn to_markdown(&self) -> String {
        let mut s = format!("| {} |\n|", self.headers.join(" | "));
        for i in 0..self.headers.len() {
            s += if self.numeric(i) { " ---: |" } else { " --- |" };
        }
        s.push('\n');
        for r in &self.rows {
            s += &format!("| {} |\n", r.join(" | "));
        }
        s
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let w = self.widths();
        let num: Vec<bool> = (0..w.len()).map(|i| self.numeric(i)).collect();
        let line = |f: &mut fmt::Formatter<'_>, cells: &[String]| -> fmt::Result {
            for (i, c) in cells.iter().enumerate() {
                if i > 0 {
                    f.write_str("  ")?;
                }
                if num[i] {
                    write!(f, "{c:>width$}", width = w[i])?;
                } else if i + 1 == cells.len() {
                    f.write_str(c)?;
                } else {
                    write!(f, "{c:<width$}", width = w[i])?;
                }
            }
            writeln!(f)
        };
        line(f, &self.headers)?;
        let rule: Vec<String> = w.iter().map(|&n| "-".repeat(n)).collect();
        line(f, &rule)?;
        for r in &self.rows {
            line(f, r)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pads_and_aligns() {
        let mut t = Table::new(["name", "GB/s"]);
        t.row(["random", "1.25"]);
        t.row(["seq", "10.5"]);
        let s = t.to_string();
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines[0], "name    GB/s");
        assert_eq!(lines[2], "random  1.25");
        assert_eq!(lines[3], "seq     10.5");
        let md = t.to_markdown();
        assert!(md.starts_with("| name | GB/s |\n| --- | ---: |\n"));
    }
}
