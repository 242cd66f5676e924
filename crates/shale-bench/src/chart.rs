//! A PNG bar chart of ops/s per workload and engine (log scale, horizontal bars).

use std::path::Path;

use plotters::coord::combinators::LogCoord;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::engine::BenchResult;
use crate::summary::Summary;
use crate::vector::report::{Curves, Point};

/// One colour per engine, told apart in print and on screen (matplotlib's "tab10").
const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Fonts are not bundled: use DejaVu Sans from the system, or draw no chart.
fn register_font() -> bool {
    let candidates = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    ];
    for c in candidates {
        if let Ok(bytes) = std::fs::read(c) {
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            return plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok();
        }
    }
    false
}

/// Draw `summary` to `path`. Returns false (and draws nothing) without a usable font.
pub fn ops_chart(summary: &Summary, path: &Path) -> BenchResult<bool> {
    if !register_font() {
        return Ok(false);
    }
    let rows = summary.workloads.len().max(1);
    let engines = summary.engines.len().max(1);
    let height = 80 + rows as u32 * (14 * engines as u32 + 10);
    let root = BitMapBackend::new(path, (1000, height)).into_drawing_area();
    root.fill(&WHITE)?;
    let max = summary
        .cells
        .values()
        .map(|(r, _)| r.ops_per_sec)
        .fold(10.0f64, f64::max)
        * 2.0;
    let mut chart = ChartBuilder::on(&root)
        .caption("ops/s (log scale, median run)", ("sans-serif", 20))
        .margin(10)
        .x_label_area_size(30)
        .y_label_area_size(160)
        .build_cartesian_2d((1.0f64..max).log_scale(), 0f64..rows as f64)?;
    chart
        .configure_mesh()
        .y_labels(0)
        .disable_y_mesh()
        .x_label_formatter(&|v| format!("{v:.0e}"))
        .draw()?;
    let band = 0.8 / engines as f64;
    for (wi, w) in summary.workloads.iter().enumerate() {
        let top = rows as f64 - wi as f64 - 0.1;
        for (ei, e) in summary.engines.iter().enumerate() {
            if let Some((r, _)) = summary.cells.get(&(w.clone(), e.clone())) {
                let y1 = top - ei as f64 * band;
                let color = COLORS.get(ei % COLORS.len()).copied().unwrap_or(BLACK);
                chart.draw_series(std::iter::once(Rectangle::new(
                    [(1.0, y1 - band * 0.9), (r.ops_per_sec.max(1.0), y1)],
                    color.filled(),
                )))?;
            }
        }
        let (_, py) = chart.backend_coord(&(1.0, rows as f64 - wi as f64 - 0.5));
        root.draw(&Text::new(
            w.clone(),
            (8, py - 7),
            ("sans-serif", 13).into_font(),
        ))?;
    }
    for (ei, e) in summary.engines.iter().enumerate() {
        let color = COLORS.get(ei % COLORS.len()).copied().unwrap_or(BLACK);
        let x = 200 + ei as i32 * 130;
        root.draw(&Rectangle::new([(x, 34), (x + 14, 46)], color.filled()))?;
        root.draw(&Text::new(
            e.clone(),
            (x + 18, 33),
            ("sans-serif", 14).into_font(),
        ))?;
    }
    root.present()?;
    Ok(true)
}

/// The recall chart's ranges: the lowest recall rounded down to a multiple of 0.05 (at
/// most 0.95), and the lowest and highest QPS.
fn recall_ranges(curves: &Curves) -> (f64, f64, f64) {
    let points = curves.values().flatten();
    let min_recall = points.clone().map(|p| p.2).fold(1.0f64, f64::min);
    let x0 = ((min_recall * 20.0).floor() / 20.0).clamp(0.0, 0.95);
    let (lo, hi) = points.fold((f64::MAX, 1.0f64), |(lo, hi), p| (lo.min(p.1), hi.max(p.1)));
    (x0, lo, hi)
}

/// One curve to draw: its data set's index and name, its engine's index and name, its points.
type Curve<'a> = (usize, &'a String, usize, &'a String, &'a Vec<Point>);

/// The curves in the report's engine order (shale first), data set by data set, so that the
/// legend lists them so.
fn in_legend_order<'a>(
    curves: &'a Curves,
    datasets: &[&'a String],
    engines: &[&'a String],
) -> Vec<Curve<'a>> {
    let mut ordered = Vec::new();
    for (d, ds) in datasets.iter().enumerate() {
        for (e, engine) in engines.iter().enumerate() {
            if let Some(pts) = curves.get(&((*ds).clone(), (*engine).clone())) {
                ordered.push((d, *ds, e, *engine, pts));
            }
        }
    }
    ordered
}

/// The recall chart's axes: recall, and QPS on a log scale.
type RecallAxes = Cartesian2d<RangedCoordf64, LogCoord<f64>>;

/// Mark the points of a curve of data set number `d`: circles, triangles, then crosses.
fn markers(
    chart: &mut ChartContext<'_, BitMapBackend<'_>, RecallAxes>,
    d: usize,
    line: Vec<(f64, f64)>,
    color: RGBColor,
) -> BenchResult<()> {
    match d {
        0 => chart.draw_series(line.into_iter().map(|p| Circle::new(p, 4, color.filled())))?,
        1 => chart.draw_series(
            line.into_iter()
                .map(|p| TriangleMarker::new(p, 5, color.filled())),
        )?,
        _ => chart.draw_series(
            line.into_iter()
                .map(|p| Cross::new(p, 4, color.stroke_width(2))),
        )?,
    };
    Ok(())
}

/// File name of the QPS-against-recall chart, beside the ops/s chart.
pub const RECALL_CHART: &str = "qps_recall.png";

/// Draw QPS (log scale) against recall@10 for every (data set, engine) curve of `records`:
/// one colour per engine (the same on every data set), one marker shape per data set.
/// Returns false (and draws nothing) without a font or without HNSW query records.
pub fn recall_chart(records: &[crate::record::Record], path: &Path) -> BenchResult<bool> {
    let summary = crate::summary::summarize(records);
    let curves = crate::vector::report::curves(&summary);
    if curves.is_empty() || !register_font() {
        return Ok(false);
    }
    let (x0, lo, hi) = recall_ranges(&curves);
    let engines: Vec<&String> = summary
        .engines
        .iter()
        .filter(|e| curves.keys().any(|(_, c)| c == *e))
        .collect();
    let mut datasets: Vec<&String> = curves.keys().map(|(ds, _)| ds).collect();
    datasets.dedup();
    let root = BitMapBackend::new(path, (1000, 650)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "queries per second against recall@10 (one thread; up and right is better)",
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(x0..1.0f64, ((lo / 1.5).max(1.0)..hi * 1.5).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("recall@10")
        .y_desc("QPS")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()?;
    let target = crate::vector::report::RECALL_TARGET;
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(target, (lo / 1.5).max(1.0)), (target, hi * 1.5)],
        BLACK.mix(0.3),
    )))?;
    for (d, ds, e, engine, pts) in in_legend_order(&curves, &datasets, &engines) {
        let color = COLORS.get(e % COLORS.len()).copied().unwrap_or(BLACK);
        let line: Vec<(f64, f64)> = pts.iter().map(|p| (p.2, p.1)).collect();
        let label = if datasets.len() > 1 {
            format!("{engine} ({ds})")
        } else {
            engine.to_string()
        };
        chart
            .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))?
            .label(label)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        markers(&mut chart, d, line, color)?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .position(SeriesLabelPosition::LowerLeft)
        .draw()?;
    root.present()?;
    Ok(true)
}
