//! Per-step metrics as JSON lines, and a PNG reward curve drawn from them.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use plotters::prelude::*;

/// One step's metrics (name -> value).
pub type StepMetrics = BTreeMap<String, f64>;

/// Means kept as `(weighted sum, weight)` per name, so means over parts of
/// different sizes (batches, ranks) combine into the mean over the whole.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct MeanSums(BTreeMap<String, (f64, f64)>);

impl MeanSums {
    /// Adds `means`, each taken over `weight` items.
    pub fn add_means(&mut self, means: &BTreeMap<String, f64>, weight: f64) {
        for (k, v) in means {
            let e = self.0.entry(k.clone()).or_default();
            e.0 += v * weight;
            e.1 += weight;
        }
    }

    /// Adds another part's sums.
    pub fn merge(&mut self, other: MeanSums) {
        for (k, (s, w)) in other.0 {
            let e = self.0.entry(k).or_default();
            e.0 += s;
            e.1 += w;
        }
    }

    /// The mean of every name.
    pub fn means(&self) -> BTreeMap<String, f64> {
        self.0
            .iter()
            .map(|(k, (s, w))| (k.clone(), s / w.max(1.0)))
            .collect()
    }
}

/// Appends one JSON object per step to a file.
pub struct MetricsLog {
    path: PathBuf,
    file: File,
}

impl MetricsLog {
    /// Opens `path`; `append = false` truncates it (a fresh run).
    pub fn open(path: &Path, append: bool) -> Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create log dir {}", dir.display()))?;
        }
        let file = OpenOptions::new()
            .create(true)
            .append(append)
            .write(true)
            .truncate(!append)
            .open(path)
            .with_context(|| format!("cannot open metrics file {}", path.display()))?;
        Ok(Self {
            path: path.to_path_buf(),
            file,
        })
    }

    /// The file written to.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `metrics` for `step` as one line (non-finite values become null).
    pub fn write(&mut self, step: u64, metrics: &StepMetrics) -> Result<()> {
        let mut obj = serde_json::Map::new();
        obj.insert("step".into(), step.into());
        for (k, v) in metrics {
            let value = serde_json::Number::from_f64(*v)
                .map(serde_json::Value::Number)
                .unwrap_or(serde_json::Value::Null);
            obj.insert(k.clone(), value);
        }
        writeln!(self.file, "{}", serde_json::Value::Object(obj))?;
        self.file.flush()?;
        Ok(())
    }
}

/// Reads `(step, value)` series for each key of a metrics JSONL file.
pub fn read_series(path: &Path) -> Result<BTreeMap<String, Vec<(f64, f64)>>> {
    let file = File::open(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut out: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
    for (i, line) in BufReader::new(file).lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let v: serde_json::Value = serde_json::from_str(&line)
            .with_context(|| format!("{}:{}: invalid JSON", path.display(), i + 1))?;
        let Some(step) = v.get("step").and_then(|s| s.as_f64()) else {
            continue;
        };
        if let Some(obj) = v.as_object() {
            for (k, x) in obj {
                if let Some(x) = x.as_f64() {
                    out.entry(k.clone()).or_default().push((step, x));
                }
            }
        }
    }
    Ok(out)
}

fn register_system_font() -> bool {
    const CANDIDATES: [&str; 3] = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
    ];
    for p in CANDIDATES {
        if let Ok(bytes) = std::fs::read(p) {
            let leaked: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, leaked).is_ok() {
                return true;
            }
        }
    }
    false
}

/// One curve of a panel: its label, colour, points, and whether each point
/// gets a marker (sparse series such as evaluations).
struct Curve<'a> {
    label: &'a str,
    color: RGBColor,
    points: Vec<(f64, f64)>,
    markers: bool,
}

fn plot_err<E: std::fmt::Display>(e: E) -> anyhow::Error {
    anyhow::anyhow!("plot: {e}")
}

/// Draws `curves` against the step in `area`, titled `title`.
fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    title: &str,
    y_desc: &str,
    curves: Vec<Curve>,
    fonts: bool,
) -> Result<()> {
    let all = || curves.iter().flat_map(|c| c.points.iter());
    let x_max = all().map(|p| p.0).fold(1.0f64, f64::max);
    let (mut y_min, mut y_max) = all().fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), p| {
        (lo.min(p.1), hi.max(p.1))
    });
    if !y_min.is_finite() || !y_max.is_finite() {
        (y_min, y_max) = (0.0, 1.0);
    }
    if y_max - y_min < 1e-9 {
        (y_min, y_max) = (y_min - 0.5, y_max + 0.5);
    }
    let pad = (y_max - y_min) * 0.05;
    let mut builder = ChartBuilder::on(area);
    builder.margin(15);
    if fonts {
        builder
            .caption(title, ("sans-serif", 20))
            .x_label_area_size(35)
            .y_label_area_size(55);
    }
    let mut chart = builder
        .build_cartesian_2d(0f64..x_max, (y_min - pad)..(y_max + pad))
        .map_err(plot_err)?;
    let mut mesh = chart.configure_mesh();
    if fonts {
        mesh.x_desc("step").y_desc(y_desc);
    } else {
        mesh.disable_x_mesh().disable_y_mesh();
    }
    mesh.draw().map_err(plot_err)?;
    let mut labelled = false;
    for c in curves.into_iter().filter(|c| !c.points.is_empty()) {
        let color = c.color;
        if c.markers {
            chart
                .draw_series(c.points.iter().map(|&p| Circle::new(p, 4, color.filled())))
                .map_err(plot_err)?;
        }
        let series = chart
            .draw_series(LineSeries::new(c.points, color.stroke_width(2)))
            .map_err(plot_err)?;
        if fonts {
            series
                .label(c.label)
                .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color));
            labelled = true;
        }
    }
    if labelled {
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .position(SeriesLabelPosition::LowerRight)
            .draw()
            .map_err(plot_err)?;
    }
    Ok(())
}

/// Draws the run's curves against the step into a PNG: the train reward with
/// the eval reward's points on top, and below it the KL to the reference and
/// the mean response length (with its max). Text labels are drawn only when a
/// system TrueType font is found.
pub fn plot_reward_curve(metrics_path: &Path, png: &Path) -> Result<()> {
    let series = read_series(metrics_path)?;
    let get = |k: &str| series.get(k).cloned().unwrap_or_default();
    let fonts = register_system_font();
    let root = BitMapBackend::new(png, (900, 800)).into_drawing_area();
    root.fill(&WHITE).map_err(plot_err)?;
    let (top, bottom) = root.split_vertically(440);
    let (left, right) = bottom.split_horizontally(450);
    let curve = |label, color, points, markers| Curve {
        label,
        color,
        points,
        markers,
    };
    draw_panel(
        &top,
        "reward",
        "mean reward",
        vec![
            curve("train", BLUE, get("reward/mean"), false),
            curve("eval (greedy)", RED, get("eval/reward_mean"), true),
        ],
        fonts,
    )?;
    // `kl` is the policy-to-reference KL of the step (0 without a reference).
    draw_panel(
        &left,
        "KL to reference",
        "kl",
        vec![curve("kl", MAGENTA, get("kl"), false)],
        fonts,
    )?;
    draw_panel(
        &right,
        "response length",
        "tokens",
        vec![
            curve("mean", GREEN, get("response_length/mean"), false),
            curve(
                "max",
                RGBColor(120, 120, 120),
                get("response_length/max"),
                false,
            ),
        ],
        fonts,
    )?;
    root.present()
        .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", png.display()))?;
    Ok(())
}
