//! A PNG bar chart of ops/s per workload and engine (log scale, horizontal bars).

use std::path::Path;

use plotters::prelude::*;

use crate::engine::BenchResult;
use crate::report::Summary;

const COLORS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
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
