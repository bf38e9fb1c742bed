//! `rubyrace report --charts DIR`: every chart of the report as `NAME.svg` and `NAME.png`,
//! ready for a blog post or a bug report, and every flame graph as `flame-….svg`.
//!
//! The PNG is the SVG rendered by resvg at 2× (for sharp text on high-density screens),
//! with the system's fonts: the charts ask for `system-ui, sans-serif`, which resvg maps to
//! the first installed sans-serif family it knows (DejaVu Sans on Debian,
//! `fonts-dejavu-core`). Without any font, the shapes still render and the text is
//! missing, so a PNG without text means a font package is missing.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use anyhow::{anyhow, Context, Result};
use resvg::{tiny_skia, usvg};

use crate::charts;
use crate::model::Report;

/// Resolution of the PNGs relative to the SVG's pixel size.
pub const SCALE: f32 = 2.0;

/// Sans-serif families to map `sans-serif` and `system-ui` to, most preferred first.
const SANS: [&str; 8] = [
    "DejaVu Sans",
    "Noto Sans",
    "Liberation Sans",
    "Cantarell",
    "Lato",
    "Helvetica",
    "Arial",
    "Verdana",
];

/// Writes every chart of `report` as `DIR/NAME.svg` and `DIR/NAME.png` (creating `dir`)
/// with `write` (the CLI's writes are atomic: a temporary file renamed into place), and
/// returns the paths written, SVG then PNG for each chart.
pub fn export_charts(
    report: &Report,
    dir: &Path,
    mut write: impl FnMut(&Path, &[u8]) -> Result<()>,
) -> Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    for chart in charts::all(report) {
        let svg_path = dir.join(format!("{}.svg", chart.name));
        let mut svg = String::with_capacity(chart.svg.len() + 64);
        svg.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
        svg.push_str(&chart.svg);
        svg.push('\n');
        write(&svg_path, svg.as_bytes())?;
        written.push(svg_path);

        let png_path = dir.join(format!("{}.png", chart.name));
        let png = svg_to_png(&chart.svg, SCALE)
            .with_context(|| format!("rendering the {} chart", chart.name))?;
        write(&png_path, &png)?;
        written.push(png_path);
    }
    // Flame graphs as inferno draws them: open one in a browser for search and zoom.
    for flame in charts::flamegraph::flamegraphs(report) {
        let path = dir.join(format!("{}.svg", flame.name));
        write(&path, flame.svg.as_bytes())?;
        written.push(path);
    }
    Ok(written)
}

/// Renders an SVG document to PNG bytes at `scale` times its size, on the system fonts.
pub fn svg_to_png(svg: &str, scale: f32) -> Result<Vec<u8>> {
    let options = usvg::Options {
        fontdb: fonts(),
        ..usvg::Options::default()
    };
    let tree = usvg::Tree::from_str(svg, &options).context("parsing the SVG")?;
    let size = tree
        .size()
        .to_int_size()
        .scale_by(scale)
        .ok_or_else(|| anyhow!("the chart has no size"))?;
    let mut pixmap = tiny_skia::Pixmap::new(size.width(), size.height())
        .ok_or_else(|| anyhow!("cannot allocate a {}×{} image", size.width(), size.height()))?;
    pixmap.fill(tiny_skia::Color::WHITE);
    resvg::render(
        &tree,
        tiny_skia::Transform::from_scale(scale, scale),
        &mut pixmap.as_mut(),
    );
    pixmap.encode_png().context("encoding the PNG")
}

/// The system's fonts, loaded once per process (a few ms to scan the font directories),
/// with `sans-serif` mapped to an installed family.
fn fonts() -> Arc<usvg::fontdb::Database> {
    static FONTS: OnceLock<Arc<usvg::fontdb::Database>> = OnceLock::new();
    FONTS
        .get_or_init(|| {
            let mut db = usvg::fontdb::Database::new();
            db.load_system_fonts();
            let installed = |db: &usvg::fontdb::Database, family: &str| {
                db.faces().any(|f| {
                    f.families
                        .iter()
                        .any(|(name, _)| name.eq_ignore_ascii_case(family))
                })
            };
            let sans = SANS
                .iter()
                .find(|f| installed(&db, f))
                .map(|f| f.to_string())
                .or_else(|| {
                    db.faces()
                        .next()
                        .and_then(|f| f.families.first())
                        .map(|(n, _)| n.clone())
                });
            if let Some(sans) = sans {
                db.set_sans_serif_family(sans);
            }
            Arc::new(db)
        })
        .clone()
}

/// Whether the system has a font the PNGs can use for their text.
pub fn has_fonts() -> bool {
    !fonts().is_empty()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exports_svg_and_png_for_every_chart() {
        let report = crate::charts::tests::report();
        let dir = std::env::temp_dir().join(format!("rubyrace-png-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let written = export_charts(&report, &dir, |p, b| Ok(std::fs::write(p, b)?)).unwrap();
        let names: Vec<String> = written
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            names,
            [
                "throughput.svg",
                "throughput.png",
                "matrix.svg",
                "matrix.png",
                "latency.svg",
                "latency.png",
                "memory.svg",
                "memory.png",
                "trial-order.svg",
                "trial-order.png"
            ]
        );
        for path in &written {
            let bytes = std::fs::read(path).unwrap();
            if path.extension().unwrap() == "png" {
                assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
                let pixmap = tiny_skia::Pixmap::decode_png(&bytes).unwrap();
                // 2× the chart's width.
                assert_eq!(
                    pixmap.width(),
                    (charts::WIDTH * 2.0) as u32,
                    "{}",
                    path.display()
                );
                // Not blank: a good share of pixels are not white.
                let inked = pixmap
                    .pixels()
                    .iter()
                    .filter(|p| p.red() < 200 || p.green() < 200 || p.blue() < 200)
                    .count();
                assert!(inked > 5_000, "{}: {inked} inked pixels", path.display());
            } else {
                let text = String::from_utf8(bytes).unwrap();
                assert!(text.starts_with("<?xml"));
                assert!(!text.contains("<script"));
            }
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn text_is_rendered_with_the_system_fonts() {
        // scripts/setup installs fonts-dejavu-core: without fonts the PNG charts have no text,
        // which is a broken install, not a reason to pass.
        assert!(
            has_fonts(),
            "no system fonts: install fonts-dejavu-core (scripts/setup)"
        );
        let blank = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"200\" height=\"40\"><rect width=\"200\" height=\"40\" fill=\"#fff\"/></svg>";
        let text = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"200\" height=\"40\" font-family=\"system-ui, sans-serif\"><rect width=\"200\" height=\"40\" fill=\"#fff\"/><text x=\"10\" y=\"28\" font-size=\"20\">Hello 123</text></svg>";
        let dark = |png: Vec<u8>| {
            tiny_skia::Pixmap::decode_png(&png)
                .unwrap()
                .pixels()
                .iter()
                .filter(|p| p.red() < 128)
                .count()
        };
        assert_eq!(dark(svg_to_png(blank, 1.0).unwrap()), 0);
        assert!(
            dark(svg_to_png(text, 1.0).unwrap()) > 50,
            "text did not render"
        );
    }
}
