//! rubyrace's history (docs/history.md): every run, check and bisection a team keeps,
//! remembered by commit in one SQLite file, and read back as series in commit order whose
//! change points are found and explained.
//!
//! - `store`: the file (`perf/history.db`, say): its schema, adding a run once however
//!   often it is added, the series' points, and which changes were already reported.
//! - `import`: a results directory → the run to add: its commit, host kind, and one point
//!   per configuration and metric, from the report's own analysis.
//! - `series`: the points of one series in commit order, their change points
//!   (`stats::changepoint`), and what each change means: its size with an interval, the
//!   last commit before and the first after, and the bisection that would settle the
//!   commits between.
//! - `chart`, `site`: the series as pages: one per experiment (`show --format html`), and
//!   the board of `history site` (an index, the pages, each run's report).
#![forbid(unsafe_code)]

pub mod chart;
pub mod import;
pub mod series;
pub mod site;
pub mod store;

pub use import::{read_dir, read_results, ImportedRun, PointRecord};
pub use series::{analyse, Analysis, Change, Drift, Series, SeriesPoint};
pub use store::History;
