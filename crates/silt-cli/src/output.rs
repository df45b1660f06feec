//! Printing results as a table (comfy-table, for people) or JSON (serde_json, for
//! machines): every command builds a [`Report`] and prints it one way or the other.

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde_json::{Map, Value};

/// `--format`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Tables for people.
    Table,
    /// One JSON document, for machines.
    Json,
}

/// What a command prints: named sections, each a table of rows or a list of key/value
/// facts.
#[derive(Default)]
pub struct Report {
    sections: Vec<(String, Section)>,
}

enum Section {
    Rows(Vec<String>, Vec<Vec<Value>>),
    Facts(Vec<(String, Value)>),
}

impl Report {
    /// A section of rows under `header`.
    pub fn rows(&mut self, name: &str, header: &[&str], rows: Vec<Vec<Value>>) -> &mut Self {
        self.sections.push((
            name.into(),
            Section::Rows(header.iter().map(|h| h.to_string()).collect(), rows),
        ));
        self
    }

    /// A section of named facts.
    pub fn facts(&mut self, name: &str, facts: Vec<(&str, Value)>) -> &mut Self {
        self.sections.push((
            name.into(),
            Section::Facts(facts.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
        ));
        self
    }

    /// Prints the report to standard output.
    pub fn print(&self, format: Format) {
        match format {
            Format::Json => {
                let mut doc = Map::new();
                for (name, s) in &self.sections {
                    let v = match s {
                        Section::Rows(h, rows) => Value::Array(
                            rows.iter()
                                .map(|r| {
                                    Value::Object(
                                        h.iter().cloned().zip(r.iter().cloned()).collect(),
                                    )
                                })
                                .collect(),
                        ),
                        Section::Facts(f) => Value::Object(f.iter().cloned().collect()),
                    };
                    doc.insert(name.clone(), v);
                }
                emit(serde_json::to_string_pretty(&Value::Object(doc)).unwrap_or_default());
            }
            Format::Table => {
                for (i, (name, s)) in self.sections.iter().enumerate() {
                    if self.sections.len() > 1 {
                        if i > 0 {
                            emit("");
                        }
                        emit(format!("{name}:"));
                    }
                    let mut t = Table::new();
                    t.load_style(UTF8_FULL_CONDENSED);
                    match s {
                        Section::Rows(h, rows) => {
                            t.set_header(h);
                            for r in rows {
                                t.add_row(r.iter().map(cell));
                            }
                        }
                        Section::Facts(f) => {
                            for (k, v) in f {
                                t.add_row(vec![k.clone(), cell(v)]);
                            }
                        }
                    }
                    emit(t);
                }
            }
        }
    }
}

/// Prints one line to standard output. A closed pipe (`silt ... | head`) ends the
/// process quietly with success instead of a panic.
pub fn emit(line: impl std::fmt::Display) {
    use std::io::Write;
    if let Err(e) = writeln!(std::io::stdout().lock(), "{line}") {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("error: write to standard output: {e}");
        std::process::exit(1);
    }
}

fn cell(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "-".into(),
        other => other.to_string(),
    }
}
