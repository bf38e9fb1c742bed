//! Mistakes in an experiment file, each with the file, line and column, the key, what was
//! expected and a suggestion; reported all together.

use std::fmt;
use std::path::PathBuf;

/// One problem found in an experiment file.
#[derive(Clone, Debug, PartialEq)]
pub struct ExperimentError {
    pub file: PathBuf,
    /// Line and column (1-based; the column counts characters) of what the problem is
    /// about; none when it is about the file as a whole (it cannot be read, or it lacks
    /// something), never a made-up one.
    pub position: Option<(usize, usize)>,
    /// Dotted key, e.g. `settings.threads`; empty for file-level problems.
    pub key: String,
    pub message: String,
    pub help: Option<String>,
}

impl fmt::Display for ExperimentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some((line, column)) => write!(f, "{}:{line}:{column}: ", self.file.display())?,
            // A problem of the file as a whole, without a key, names the file itself
            // ("cannot read FILE: ...").
            None if self.key.is_empty() => {}
            None => write!(f, "{}: ", self.file.display())?,
        }
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        write!(f, "{}", self.message)?;
        if let Some(help) = &self.help {
            write!(f, "\n    help: {help}")?;
        }
        Ok(())
    }
}

/// Every problem found in one file.
#[derive(Clone, Debug, PartialEq)]
pub struct ExperimentErrors(pub Vec<ExperimentError>);

impl fmt::Display for ExperimentErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{e}")?;
        }
        let n = self.0.len();
        write!(
            f,
            "\n{n} error{} in the experiment file; nothing was run",
            if n == 1 { "" } else { "s" }
        )
    }
}

impl std::error::Error for ExperimentErrors {}

/// The 1-based line and column (in characters) of a byte offset of `text`.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

/// An OS error's message without its number: "No such file or directory".
pub(crate) fn os_message(e: &std::io::Error) -> String {
    let message = e.to_string();
    match message.rfind(" (os error ") {
        Some(i) if message.ends_with(')') => message[..i].to_string(),
        _ => message,
    }
}
