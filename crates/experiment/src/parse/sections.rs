//! The walk over `[matrix]` (axes and their labelled values) and `[rubies]` (each Ruby's
//! definition, what it answers about itself, and `bundle check`). Part of the one walk of
//! [`Parser`].

use std::collections::BTreeMap;
use std::ops::Range;

use toml_edit::{Item, Table, TableLike};

use super::root::RootKeys;
use super::{describe, element_spans, labelled, Axis, AxisValue, Parser, Placed};
use crate::model::RubyDef;
use crate::settings::{did_you_mean, setting_kind, setting_names, Kind, SettingValue, RUBY_ALL};
use rubies::discovery::RubyCapabilities;

impl<'a> Parser<'a> {
    /// Without `[rubies]` (and without `ruby = "all"`), the `ruby` on PATH is the only
    /// Ruby, named "system"; no `ruby` there is an error of the file as a whole.
    pub(crate) fn system_ruby(&mut self, root: &Table, keys: &mut RootKeys) {
        if self.ruby_all.is_some() || !keys.rubies.is_empty() || root.get("rubies").is_some() {
            return;
        }
        match rubies::discovery::resolve_executable("ruby") {
            Ok(path) => {
                let def = RubyDef {
                    argv: vec![path.display().to_string()],
                    env: BTreeMap::new(),
                    gemfile: None,
                };
                keys.rubies.insert("system".into(), (def, None));
            }
            Err(e) => {
                // About the file as a whole: nothing in it names a Ruby.
                self.error(
                    &None,
                    "rubies",
                    format!("no [rubies] given and {e:#}"),
                    None,
                );
                self.failed_rubies.push("system".into());
                self.rubies_reported = true;
            }
        }
    }

    /// Reads `[matrix]`: each key is a setting and its value an array of alternatives.
    pub(crate) fn matrix(&mut self, table: &dyn TableLike) -> Vec<Axis> {
        let mut axes = Vec::new();
        for (name, item) in table.iter() {
            let key_span = table.get_key_value(name).and_then(|(k, _)| k.span());
            let dotted = format!("matrix.{name}");
            let Some(kind) = setting_kind(name) else {
                self.unknown_key(&key_span, &dotted, name, &setting_names());
                continue;
            };
            // `ruby = "all"`: every Ruby of [rubies], or of the machine; the values are
            // filled in once the Rubies are known (see `expand_ruby_all`).
            if name == "ruby" && item.as_str() == Some(RUBY_ALL) {
                self.ruby_all = Some(item.span());
                axes.push(Axis {
                    name: name.to_string(),
                    values: Vec::new(),
                    span: key_span,
                    duplicate_labels: false,
                });
                continue;
            }
            let Some(array) = item.as_array() else {
                let help = match item.as_str() {
                    Some(s) if name == "ruby" && did_you_mean(s, &[RUBY_ALL]).is_some() => format!(
                        "did you mean ruby = \"{RUBY_ALL}\" (every Ruby of [rubies], or of this \
                         machine)? Otherwise list the Rubies: ruby = [a, b]"
                    ),
                    _ if name == "ruby" => "a matrix axis lists the values to compare, e.g. \
                         ruby = [a, b], or ruby = \"all\" for every Ruby; a single value \
                         belongs in [settings]"
                        .to_string(),
                    _ => format!(
                        "a matrix axis lists the values to compare, e.g. {name} = [a, b]; a \
                         single value belongs in [settings]"
                    ),
                };
                self.error(
                    &item.span(),
                    &dotted,
                    format!(
                        "expected an array of alternatives, found {}",
                        describe(item)
                    ),
                    Some(help),
                );
                self.rejected.insert(name.to_string());
                continue;
            };
            if array.is_empty() {
                self.error(
                    &item.span(),
                    &dotted,
                    "a matrix axis needs at least one value",
                    None,
                );
                self.rejected.insert(name.to_string());
                continue;
            }
            let mut values = Vec::new();
            for (i, v) in array.iter().enumerate() {
                let element_key = format!("{dotted}[{i}]");
                // `{ label = "...", value = ... }` names a value.
                let (inner, label) = match labelled(v) {
                    Some((inner, label)) => (inner, Some(label)),
                    None => (v.clone(), None),
                };
                let items = element_spans(Some(&inner));
                let inner_item = Item::Value(inner);
                let errors_before = self.errors.len();
                let checked = self.check_value(&element_key, kind, &inner_item);
                if self.errors.len() > errors_before {
                    self.rejected.insert(name.to_string());
                }
                if let Some(checked) = checked {
                    let chosen = label.is_some();
                    let label = label.unwrap_or_else(|| checked.label());
                    // Every value's label is recorded with its configurations (`axes`),
                    // even on an axis of one value.
                    self.check_label(&v.span(), &element_key, &label);
                    values.push(AxisValue {
                        chosen,
                        placed: Placed {
                            value: checked,
                            span: v.span(),
                            key: element_key,
                            items,
                        },
                        label,
                    });
                }
            }
            let mut seen: Vec<&str> = Vec::new();
            let mut duplicate_labels = false;
            for v in &values {
                if seen.contains(&v.label.as_str()) {
                    let (span, key) = (v.placed.span.clone(), dotted.clone());
                    self.error(
                        &span,
                        &key,
                        format!("two values of this axis have the label {:?}", v.label),
                        Some(
                            "give each value its own label: { label = \"...\", value = ... }"
                                .into(),
                        ),
                    );
                    duplicate_labels = true;
                    break;
                }
                seen.push(&v.label);
            }
            axes.push(Axis {
                name: name.to_string(),
                values,
                span: key_span,
                duplicate_labels,
            });
        }
        axes
    }

    /// Reads `[rubies]`.
    pub(crate) fn rubies(
        &mut self,
        table: &dyn TableLike,
    ) -> BTreeMap<String, (RubyDef, Option<Range<usize>>)> {
        let mut rubies = BTreeMap::new();
        for (name, item) in table.iter() {
            let dotted = format!("rubies.{name}");
            let span = item.span();
            let (argv, env, gemfile) = if let Some(program) = item.as_str() {
                (vec![program.to_string()], BTreeMap::new(), None)
            } else if let Some(t) = item.as_table_like() {
                let mut argv = None;
                let mut env = BTreeMap::new();
                let mut gemfile = None;
                for (k, v) in t.iter() {
                    let key = format!("{dotted}.{k}");
                    let key_span = t.get_key_value(k).and_then(|(kk, _)| kk.span());
                    match k {
                        "path" => match v.as_str() {
                            Some(p) => argv = Some(vec![p.to_string()]),
                            None => {
                                let found = describe(v);
                                self.error(
                                    &v.span(),
                                    &key,
                                    format!("expected a string, found {found}"),
                                    None,
                                )
                            }
                        },
                        "argv" => {
                            if let Some(SettingValue::StrList(a)) =
                                self.check_value(&key, Kind::StrList, v)
                            {
                                if a.is_empty() {
                                    self.error(
                                        &v.span(),
                                        &key,
                                        "expected at least the Ruby executable",
                                        None,
                                    );
                                } else {
                                    argv = Some(a);
                                }
                            }
                        }
                        "env" => {
                            if let Some(SettingValue::StrMap(m)) =
                                self.check_value(&key, Kind::StrMap, v)
                            {
                                env = m.into_iter().collect();
                            }
                        }
                        "gemfile" => match v.as_str() {
                            Some(g) => {
                                let path = self.resolve_path(g);
                                if !path.is_file() {
                                    self.error(
                                        &v.span(),
                                        &key,
                                        format!("no such Gemfile: {}", path.display()),
                                        None,
                                    );
                                }
                                gemfile = Some(path);
                            }
                            None => {
                                let found = describe(v);
                                self.error(
                                    &v.span(),
                                    &key,
                                    format!("expected a string, found {found}"),
                                    None,
                                )
                            }
                        },
                        other => self.unknown_key(
                            &key_span,
                            &key,
                            other,
                            &["path", "argv", "env", "gemfile"],
                        ),
                    }
                }
                match argv {
                    Some(a) => (a, env, gemfile),
                    None => {
                        // Not said again when `path` or `argv` was there but wrong.
                        if t.get("path").is_none() && t.get("argv").is_none() {
                            self.error(
                                &span,
                                &dotted,
                                "expected `path` (the Ruby executable) or `argv` (executable and options)",
                                Some(format!("e.g. {name} = {{ path = \"/usr/bin/ruby\" }}")),
                            );
                        }
                        self.failed_rubies.push(name.to_string());
                        continue;
                    }
                }
            } else {
                let found = describe(item);
                self.error(
                    &span,
                    &dotted,
                    format!(
                        "expected a path string or a table with `path` or `argv`, found {found}"
                    ),
                    None,
                );
                self.failed_rubies.push(name.to_string());
                continue;
            };
            // Resolve the executable now: a missing Ruby is an error before anything runs.
            let mut argv = argv;
            if argv[0].contains('/') && !argv[0].starts_with('~') {
                argv[0] = self.resolve_path(&argv[0]).display().to_string();
            }
            match rubies::discovery::resolve_executable(&argv[0]) {
                Ok(path) => argv[0] = path.display().to_string(),
                Err(e) => {
                    self.error(
                        &span,
                        &dotted,
                        format!("{e:#}"),
                        Some("`rubyrace rubies` lists the Rubies found on this machine".into()),
                    );
                    self.failed_rubies.push(name.to_string());
                    continue;
                }
            }
            rubies.insert(name.to_string(), (RubyDef { argv, env, gemfile }, span));
        }
        rubies
    }

    /// What a Ruby with these options and environment can do, asked once per experiment.
    pub(crate) fn capabilities(
        &mut self,
        argv: &[String],
        env: &[(String, String)],
    ) -> Result<RubyCapabilities, String> {
        self.capabilities
            .entry((argv.to_vec(), env.to_vec()))
            .or_insert_with(|| {
                rubies::discovery::ruby_capabilities(argv, env).map_err(|e| format!("{e:#}"))
            })
            .clone()
    }

    /// Whether the Gemfile in `env` (BUNDLE_GEMFILE) is satisfied for this Ruby.
    pub(crate) fn bundle_check(
        &mut self,
        argv: &[String],
        env: &[(String, String)],
    ) -> Result<(), String> {
        self.bundles
            .entry((argv.to_vec(), env.to_vec()))
            .or_insert_with(|| {
                rubies::discovery::bundle_check(argv, env).map_err(|e| format!("{e:#}"))
            })
            .clone()
    }

    /// What the Ruby that runs a server's executable under `bundle exec` says (`argv` ends
    /// in the server's `--version`; `env` names the Gemfile), asked once.
    pub(crate) fn server_check(
        &mut self,
        argv: &[String],
        env: &[(String, String)],
    ) -> Result<rubies::discovery::BundledServer, String> {
        self.server_checks
            .entry((argv.to_vec(), env.to_vec()))
            .or_insert_with(|| {
                rubies::discovery::bundled_server_check(argv, env).map_err(|e| format!("{e:#}"))
            })
            .clone()
    }
}
