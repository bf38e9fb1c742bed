//! The matrix: layers merged into configurations (the expansion pass), exclusions,
//! `ruby = "all"` expanded to every Ruby found, and the labels that name the
//! configurations (unique, or an error).

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use toml_edit::TableLike;

use crate::model::RubyDef;
use crate::parse::{
    AxisValue, ConfigEntry, LabelPart, Layer, Parser, Placed, Point, RootKeys, Span,
};
use crate::settings::SettingValue;

/// Merges layers: later layers replace a key, except `env`, whose variables are merged.
pub(crate) fn merge(layers: &[&Layer]) -> Layer {
    let mut merged = Layer::new();
    for layer in layers {
        for (k, v) in layer.iter() {
            if k == "env" {
                if let Some(existing) = merged.get_mut("env") {
                    if let (SettingValue::StrMap(into), SettingValue::StrMap(from)) =
                        (&mut existing.value, &v.value)
                    {
                        for (name, value) in from {
                            into.insert(name.clone(), value.clone());
                        }
                        continue;
                    }
                }
            }
            merged.insert(k.clone(), v.clone());
        }
    }
    merged
}

/// Whether every key of an exclusion matches the configuration (`env` as a subset).
pub(crate) fn excluded_by(layer: &Layer, exclusion: &Layer) -> bool {
    exclusion.iter().all(|(k, want)| {
        let have = layer.get(k).map(|p| &p.value);
        match (k.as_str(), have, &want.value) {
            ("env", Some(SettingValue::StrMap(have)), SettingValue::StrMap(want)) => {
                want.iter().all(|(name, v)| have.get(name) == Some(v))
            }
            (_, Some(have), want) => have == want,
            (_, None, _) => false,
        }
    })
}

/// `ruby = "all"` in `[matrix]`: its axis gets every Ruby of `[rubies]`, or of the
/// machine (which then become the experiment's Rubies). `root` is the file's table.
pub(crate) fn fill_ruby_all(p: &mut Parser, root: &toml_edit::Table, keys: &mut RootKeys) {
    let Some(span) = p.ruby_all.clone() else {
        return;
    };
    let declared = root.get("rubies").and_then(|r| r.as_table_like());
    let values = if root.get("rubies").is_some() && declared.is_none() {
        Vec::new() // `rubies` is not a table: reported already
    } else {
        expand_ruby_all(p, &span, declared, &mut keys.rubies)
    };
    if let Some(axis) = keys.axes.iter_mut().find(|axis| axis.name == "ruby") {
        axis.values = values;
    }
}

/// The Rubies `ruby = "all"` stands for, in order: those of `[rubies]` in file order, or,
/// without `[rubies]`, those `discover` finds that run (one per canonical executable, in
/// discovery order: version managers, PATH, then /usr/bin), which then become the
/// experiment's Rubies. `declared` is the file's `[rubies]` table, if it has one.
pub(crate) fn expand_ruby_all(
    p: &mut Parser,
    span: &Span,
    declared: Option<&dyn TableLike>,
    rubies: &mut BTreeMap<String, (RubyDef, Option<Range<usize>>)>,
) -> Vec<AxisValue> {
    let names: Vec<String> = match declared {
        // Rubies that failed to resolve are reported already and left out.
        Some(t) => {
            let names: Vec<String> = t
                .iter()
                .map(|(k, _)| k.to_string())
                .filter(|k| rubies.contains_key(k))
                .collect();
            // Each name is a label part (`ruby=NAME`).
            for name in &names {
                let key_span = t.get_key_value(name).and_then(|(k, _)| k.span());
                p.check_label(&key_span, &format!("rubies.{name}"), name);
            }
            names
        }
        None => {
            rubies.clear();
            let mut seen = std::collections::HashSet::new();
            let mut names = Vec::new();
            for r in (p.discover)() {
                // Those that do not run (`rubyrace rubies` says why) are left out.
                if r.error.is_some() || r.description.is_none() {
                    continue;
                }
                let canonical = std::fs::canonicalize(&r.path).unwrap_or_else(|_| r.path.clone());
                if !seen.insert(canonical) || rubies.contains_key(&r.name) {
                    continue;
                }
                p.check_label(span, "matrix.ruby", &r.name);
                let def = RubyDef {
                    argv: vec![r.path.display().to_string()],
                    env: BTreeMap::new(),
                    gemfile: None,
                };
                rubies.insert(r.name.clone(), (def, None));
                names.push(r.name);
            }
            if names.is_empty() {
                p.error(
                    span,
                    "matrix.ruby",
                    "ruby = \"all\": no Ruby that runs was found on this machine",
                    Some(
                        "`rubyrace rubies` lists what was found; or name the Rubies in [rubies]"
                            .into(),
                    ),
                );
                p.rubies_reported = true;
            }
            names
        }
    };
    names
        .into_iter()
        .map(|name| AxisValue {
            placed: Placed {
                value: SettingValue::Str(name.clone()),
                span: span.clone(),
                key: "matrix.ruby".into(),
                items: Vec::new(),
            },
            label: name,
            chosen: false,
        })
        .collect()
}

/// Reports configuration `id` having the same label as configuration `first`, at the
/// part of its label where the two differ (the second `[[configs]]` label, or a matrix
/// value), naming where the first one's comes from.
pub(crate) fn duplicate_label(
    p: &mut Parser,
    duplicate_axes: &[&str],
    (first_id, first): (usize, &Point),
    (id, second): (usize, &Point),
) {
    let n = first.parts.len().max(second.parts.len());
    let differs = (0..n).find(|&i| match (first.parts.get(i), second.parts.get(i)) {
        (Some(a), Some(b)) => a.span != b.span || a.text != b.text,
        _ => true,
    });
    let part_of =
        |point: &Point| differs.and_then(|i| point.parts.get(i).or(point.parts.last()).cloned());
    let (theirs, ours) = (part_of(first), part_of(second));
    // Two values of one axis with the same label are reported at the axis already.
    if ours
        .as_ref()
        .and_then(|part| part.axis.as_ref())
        .is_some_and(|axis| duplicate_axes.contains(&axis.as_str()))
    {
        return;
    }
    let first_at = p.at(&theirs
        .as_ref()
        .map_or(first.span.clone(), |part| part.span.clone()));
    let (span, key) = match ours {
        Some(part) => (part.span, part.key),
        None => (second.span.clone(), "configs".to_string()),
    };
    p.error(
        &span,
        &key,
        format!(
            "configurations {first_id} and {id} have the same label {:?}; the first is from {first_at}",
            second.label
        ),
        Some("give them distinct labels: `label` in [[configs]], or { label = \"...\", value = ... } in [matrix]".into()),
    );
}

/// The label part of each `[[configs]]` entry: its `label`, or else, when there are several
/// entries, every key it sets; a single entry without `label` adds nothing.
pub(crate) fn labels_for_configs(
    p: &mut Parser,
    configs: &[ConfigEntry],
) -> Vec<Option<LabelPart>> {
    let several = configs.len() > 1;
    configs
        .iter()
        .enumerate()
        .map(|(i, entry)| {
            if let Some(label) = &entry.label {
                let text = label.value.as_str().unwrap_or_default().to_string();
                p.check_label(&label.span, &label.key, &text);
                return Some(LabelPart {
                    text,
                    span: label.span.clone(),
                    key: label.key.clone(),
                    axis: None,
                });
            }
            if !several {
                return None;
            }
            let parts: Vec<String> = entry
                .layer
                .iter()
                .map(|(k, v)| {
                    let l = v.value.label();
                    p.check_label(&v.span, &v.key, &l);
                    if k == "env" {
                        l
                    } else {
                        format!("{k}={l}")
                    }
                })
                .collect();
            Some(LabelPart {
                text: if parts.is_empty() {
                    "base".into()
                } else {
                    parts.join(" ")
                },
                span: entry.span.clone(),
                key: format!("configs[{i}]"),
                axis: None,
            })
        })
        .collect()
}

/// The configurations before they are resolved: each `[[configs]]` entry (or one empty
/// one) × the product of the `[matrix]` axes, `[settings]` beneath both, each with its
/// label and the places its parts come from.
pub(crate) fn expand(p: &mut Parser, keys: &mut RootKeys) -> Vec<Point> {
    if keys.configs.is_empty() {
        keys.configs.push(ConfigEntry {
            layer: Layer::new(),
            label: None,
            span: None,
            broken: false,
        });
    }
    let config_parts = labels_for_configs(p, &keys.configs);
    let mut points: Vec<Point> = Vec::new();
    for (entry, config_part) in keys.configs.iter().zip(config_parts) {
        let mut combos: Vec<(Layer, Vec<LabelPart>, BTreeMap<String, String>)> =
            vec![(Layer::new(), Vec::new(), BTreeMap::new())];
        for axis in &keys.axes {
            let mut next = Vec::new();
            for (combo, parts, axis_labels) in &combos {
                for v in &axis.values {
                    let mut c = combo.clone();
                    c.insert(axis.name.clone(), v.placed.clone());
                    let mut l = parts.clone();
                    // `ruby = "all"` names the Ruby even when it finds only one: what
                    // it expands to depends on the machine, and the label should say.
                    if axis.values.len() > 1 || (axis.name == "ruby" && p.ruby_all.is_some()) {
                        l.push(LabelPart {
                            text: if axis.name == "env" || v.chosen {
                                v.label.clone()
                            } else {
                                format!("{}={}", axis.name, v.label)
                            },
                            span: v.placed.span.clone(),
                            key: v.placed.key.clone(),
                            axis: Some(axis.name.clone()),
                        });
                    }
                    let mut al = axis_labels.clone();
                    al.insert(axis.name.clone(), v.label.clone());
                    next.push((c, l, al));
                }
            }
            combos = next;
        }
        for (combo, axis_parts, axis_labels) in combos {
            let layer = merge(&[&keys.base, &entry.layer, &combo]);
            let mut parts = Vec::new();
            parts.extend(config_part.clone());
            parts.extend(axis_parts);
            let label = if parts.is_empty() {
                "default".to_string()
            } else {
                parts
                    .iter()
                    .map(|part| part.text.as_str())
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            points.push(Point {
                layer,
                label,
                parts,
                axes: axis_labels,
                span: entry.span.clone(),
            });
        }
    }
    points
}

/// Leaves out the points each `[[exclude]]` matches: an exclusion that matches none, or
/// that leaves nothing to run, is an error at its place.
pub(crate) fn apply_exclusions(p: &mut Parser, keys: &RootKeys, points: &mut Vec<Point>) {
    // An exclusion with a rejected value, or on a setting whose value was rejected
    // elsewhere, cannot be matched reliably: it is left out rather than reported as
    // matching nothing (or everything).
    let mut emptied_by = None;
    for (i, (exclusion, span, broken)) in keys.exclusions.iter().enumerate() {
        if *broken || exclusion.keys().any(|k| p.rejected.contains(k)) {
            continue;
        }
        let before = points.len();
        points.retain(|point| !excluded_by(&point.layer, exclusion));
        if points.len() == before {
            p.error(
                span,
                &format!("exclude[{i}]"),
                "this exclusion matches no configuration",
                Some("check its values against [matrix]; values must match exactly".into()),
            );
        } else if points.is_empty() {
            emptied_by = Some((i, span.clone()));
        }
    }
    if let Some((i, span)) = &emptied_by {
        p.error(
            span,
            &format!("exclude[{i}]"),
            "every configuration is excluded; nothing would run",
            Some("an exclusion leaves out every configuration that matches all its keys".into()),
        );
    }
}

/// Every configuration's label is its own: a second one with the same label is an error
/// at the part of it that should differ (`duplicate_label`).
pub(crate) fn check_unique_labels(p: &mut Parser, keys: &RootKeys, points: &[Point]) {
    // Labels are unique. When a value that makes labels was rejected, the labels are not
    // the ones the file will give: a clash among them would follow from that error.
    let labels_broken = keys.axes.iter().any(|axis| p.rejected.contains(&axis.name))
        || p.rejected.contains("label")
        || (keys.configs.len() > 1 && keys.configs.iter().any(|c| c.label.is_none() && c.broken));
    let duplicate_axes: Vec<&str> = keys
        .axes
        .iter()
        .filter(|axis| axis.duplicate_labels)
        .map(|axis| axis.name.as_str())
        .collect();
    let mut first_with_label: HashMap<&str, usize> = HashMap::new();
    for (id, point) in points.iter().enumerate() {
        match first_with_label.get(point.label.as_str()) {
            Some(&first) if !labels_broken => {
                duplicate_label(p, &duplicate_axes, (first, &points[first]), (id, point))
            }
            Some(_) => {}
            None => {
                first_with_label.insert(&point.label, id);
            }
        }
    }
}
