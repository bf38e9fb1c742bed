//! The walk over `[fleet]` (crate::fleet): each key checked with its position, as the rest
//! of the file. Part of the one walk of [`Parser`].

use toml_edit::Item;

use super::{describe, Parser};
use crate::fleet::{Fleet, ENGINES, FLEET_KEYS, LOADS};
use crate::settings::{Kind, SettingValue};

impl Parser<'_> {
    /// `[fleet]`: the engine, how many nodes at once, and what `sbatch` is given.
    pub(crate) fn fleet(&mut self, item: &Item) -> Option<Fleet> {
        let Some(table) = item.as_table_like() else {
            self.error(
                &item.span(),
                "fleet",
                format!("expected a table, found {}", describe(item)),
                Some("e.g. [fleet] with engine = \"slurm\" and nodes = 4".into()),
            );
            return None;
        };
        let mut fleet = Fleet::default();
        for (name, value) in table.iter() {
            let key = format!("fleet.{name}");
            match name {
                "engine" => {
                    if let Some(SettingValue::Str(e)) =
                        self.check_value(&key, Kind::OneOf(ENGINES), value)
                    {
                        fleet.engine = e;
                    }
                }
                "load" => {
                    if let Some(SettingValue::Str(l)) =
                        self.check_value(&key, Kind::OneOf(LOADS), value)
                    {
                        fleet.load = l;
                    }
                }
                "nodes" => {
                    if let Some(SettingValue::Int(n)) = self.check_value(
                        &key,
                        Kind::Int {
                            min: 1,
                            max: 10_000,
                        },
                        value,
                    ) {
                        fleet.nodes = n as u32;
                    }
                }
                "retries" => {
                    if let Some(SettingValue::Int(n)) =
                        self.check_value(&key, Kind::Int { min: 0, max: 100 }, value)
                    {
                        fleet.retries = n as u32;
                    }
                }
                "partition" => {
                    if let Some(SettingValue::Str(p)) = self.check_value(&key, Kind::Str, value) {
                        if p.trim().is_empty() || p.starts_with('-') {
                            self.error(
                                &value.span(),
                                &key,
                                format!("expected a partition name, found {p:?}"),
                                Some("the name `sinfo` lists, e.g. partition = \"bench\"".into()),
                            );
                        } else {
                            fleet.partition = Some(p);
                        }
                    }
                }
                "time_limit" | "probe_timeout" => {
                    if let Some(d) = self
                        .check_value(&key, Kind::Duration, value)
                        .and_then(|v| v.as_duration())
                    {
                        if d < std::time::Duration::from_secs(60) {
                            self.error(
                                &value.span(),
                                &key,
                                "expected at least a minute (Slurm counts time limits in minutes)",
                                Some(format!("e.g. {name} = \"30m\"")),
                            );
                        } else if name == "time_limit" {
                            fleet.time_limit = Some(d);
                        } else {
                            fleet.probe_timeout = d;
                        }
                    }
                }
                "sbatch" => {
                    if let Some(SettingValue::StrList(args)) =
                        self.check_value(&key, Kind::StrList, value)
                    {
                        if let Some(bad) = args.iter().find(|a| reserved_sbatch(a)) {
                            self.error(&value.span(), &key, format!("`{bad}` is set by rubyrace for every block"), Some("rubyrace sets --array, --exclusive, --output, --job-name, --partition, --time, --nodes and --no-requeue itself; use [fleet] partition and time_limit".into()));
                        } else {
                            fleet.sbatch = args;
                        }
                    }
                }
                other => self.unknown_key(
                    &table.key(other).and_then(|k| k.span()).or(value.span()),
                    &key,
                    other,
                    FLEET_KEYS,
                ),
            }
        }
        Some(fleet)
    }
}

/// An `sbatch` argument rubyrace sets itself, which a block must not be given twice.
fn reserved_sbatch(arg: &str) -> bool {
    const RESERVED: &[&str] = &[
        "-a",
        "--array",
        "--exclusive",
        "-o",
        "--output",
        "-e",
        "--error",
        "-J",
        "--job-name",
        "-p",
        "--partition",
        "-t",
        "--time",
        "-N",
        "--nodes",
        "--no-requeue",
        "--requeue",
        "--wrap",
        "--parsable",
    ];
    let name = arg.split('=').next().unwrap_or(arg);
    RESERVED.contains(&name)
}
