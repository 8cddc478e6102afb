//! PNG charts with plotters' pure-Rust bitmap backend. Text is drawn with ab_glyph from a TrueType font found on
//! the system (DejaVu / Liberation, or $MEMORY_BENCH_FONT), so no font library is needed at build time.

use std::path::{Path, PathBuf};

use plotters::coord::combinators::IntoLogRange;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::{Results, SpeedRow};

const FONT_CANDIDATES: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation/LiberationSans-Regular.ttf",
];

fn register_font() -> anyhow::Result<()> {
    let path = std::env::var_os("MEMORY_BENCH_FONT")
        .map(PathBuf::from)
        .or_else(|| FONT_CANDIDATES.iter().map(PathBuf::from).find(|p| p.exists()))
        .ok_or_else(|| anyhow::anyhow!("no TrueType font found for the charts (set MEMORY_BENCH_FONT to a .ttf file)"))?;
    // plotters keeps the font for the life of the process.
    let bytes: &'static [u8] = Box::leak(std::fs::read(&path)?.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| anyhow::anyhow!("{} is not a usable TrueType font", path.display()))?;
    Ok(())
}

const COLORS: &[RGBColor] = &[RGBColor(31, 119, 180), RGBColor(44, 160, 44), RGBColor(255, 127, 14), RGBColor(214, 39, 40), RGBColor(148, 103, 189)];

fn series_color(engine: &str, mode: &str) -> RGBColor {
    match (engine, mode) {
        ("memory-rs", "keyword") => COLORS[0],
        ("memory-rs", "keyword, server") => COLORS[4],
        ("memory-rs", _) => COLORS[1],
        ("QMD", _) => COLORS[2],
        _ => COLORS[3],
    }
}

type Series = (String, RGBColor, Vec<(f64, f64)>);

fn series(res: &Results, value: fn(&SpeedRow) -> Option<f64>) -> Vec<Series> {
    let mut out: Vec<Series> = Vec::new();
    for r in &res.speed {
        let Some(v) = value(r).filter(|v| *v > 0.0) else { continue };
        let name = format!("{} {}", r.engine, r.mode);
        match out.iter_mut().find(|s| s.0 == name) {
            Some(s) => s.2.push((r.notes as f64, v)),
            None => out.push((name, series_color(&r.engine, &r.mode), vec![(r.notes as f64, v)])),
        }
    }
    for s in &mut out {
        s.2.sort_by(|a, b| a.0.total_cmp(&b.0));
    }
    out
}

/// A log-log chart of one figure against corpus size, one line per engine and mode.
fn line_chart(path: &Path, title: &str, y_label: &str, data: &[Series]) -> anyhow::Result<bool> {
    let points: Vec<(f64, f64)> = data.iter().flat_map(|s| s.2.iter().copied()).collect();
    if points.is_empty() {
        return Ok(false);
    }
    let (xmin, xmax) = points.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (ymin, ymax) = points.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(48)
        .y_label_area_size(80)
        .build_cartesian_2d((xmin / 1.5..xmax * 1.5).log_scale(), (ymin / 2.0..ymax * 2.0).log_scale())?;
    chart
        .configure_mesh()
        .x_desc("notes in the corpus (log)")
        .y_desc(y_label)
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| fmt_value(*y))
        .draw()?;
    for (name, color, pts) in data {
        let c = *color;
        chart
            .draw_series(LineSeries::new(pts.iter().copied(), c.stroke_width(3)))?
            .label(name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3)));
        chart.draw_series(pts.iter().map(|p| Circle::new(*p, 5, c.filled())))?;
    }
    legend_and_save(&mut chart, &root, SeriesLabelPosition::UpperLeft)
}

/// The end of every chart: its legend at `position` (where it covers the least data), then the file written.
fn legend_and_save<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, BitMapBackend<'a>, CT>,
    root: &DrawingArea<BitMapBackend<'a>, Shift>,
    position: SeriesLabelPosition,
) -> anyhow::Result<bool> {
    chart.configure_series_labels().position(position).label_font(("sans-serif", 15)).background_style(WHITE.mix(0.85)).border_style(BLACK).draw()?;
    root.present()?;
    Ok(true)
}

fn fmt_value(v: f64) -> String {
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.1}")
    } else if v >= 0.01 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// Grouped bars: nDCG@10, MAP@100, Recall@100 for each engine and mode measured.
fn quality_chart(path: &Path, res: &Results) -> anyhow::Result<bool> {
    let rows: Vec<(String, [f64; 3])> = res
        .quality
        .iter()
        .filter_map(|q| q.scores.as_ref().ok().map(|s| (format!("{} {}", q.engine, q.mode), [s.ndcg10, s.map100, s.recall100])))
        .collect();
    if rows.is_empty() {
        return Ok(false);
    }
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let n = rows.len();
    let mut chart = ChartBuilder::on(&root)
        .caption("Retrieval quality on Cranfield dev (113 queries)", ("sans-serif", 24))
        .margin(16)
        .x_label_area_size(60)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..n as f64, 0f64..1f64)?;
    let labels: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n * 2 + 1)
        .x_label_formatter(&|x| {
            let i = x.floor() as usize;
            if (x - x.floor() - 0.5).abs() < 1e-6 && i < labels.len() {
                labels[i].clone()
            } else {
                String::new()
            }
        })
        .y_desc("score")
        .label_style(("sans-serif", 14))
        .axis_desc_style(("sans-serif", 16))
        .draw()?;
    let metrics = ["nDCG@10", "MAP@100", "Recall@100"];
    for (m, name) in metrics.iter().enumerate() {
        let c = COLORS[m];
        chart
            .draw_series(rows.iter().enumerate().map(|(i, r)| {
                let x0 = i as f64 + 0.1 + m as f64 * 0.27;
                Rectangle::new([(x0, 0.0), (x0 + 0.25, r.1[m])], c.filled())
            }))?
            .label(*name)
            .legend(move |(x, y)| Rectangle::new([(x, y - 6), (x + 14, y + 6)], c.filled()));
        chart.draw_series(rows.iter().enumerate().map(|(i, r)| {
            let x0 = i as f64 + 0.1 + m as f64 * 0.27;
            Text::new(format!("{:.2}", r.1[m]), (x0, r.1[m] + 0.03), ("sans-serif", 12))
        }))?;
    }
    legend_and_save(&mut chart, &root, SeriesLabelPosition::UpperRight)
}

/// Draw every chart the results allow; returns (title, file name) of those written.
pub fn draw_all(res: &Results, dir: &Path) -> anyhow::Result<Vec<(String, String)>> {
    register_font()?;
    let mut out = Vec::new();
    let mut add = |file: &str, title: &str, drawn: bool| {
        if drawn {
            out.push((title.to_string(), file.to_string()));
        }
    };
    let t = "Whole-process search time vs corpus size";
    add(
        "search-whole-process.png",
        t,
        line_chart(
            &dir.join("search-whole-process.png"),
            t,
            "seconds per search (log)",
            &series(res, |r| r.cli_search.as_ref().ok().map(|c| c.wall_s)),
        )?,
    );
    let t = "In-process search p50 vs corpus size";
    add(
        "search-in-process-p50.png",
        t,
        line_chart(&dir.join("search-in-process-p50.png"), t, "milliseconds (log)", &series(res, |r| r.inproc_p50_ms.as_ref().ok().copied()))?,
    );
    let t = "Cold index time vs corpus size";
    add("index-cold.png", t, line_chart(&dir.join("index-cold.png"), t, "seconds (log)", &series(res, |r| r.cold.as_ref().ok().map(|c| c.wall_s)))?);
    let t = "No-change re-index time vs corpus size";
    add(
        "index-no-change.png",
        t,
        line_chart(&dir.join("index-no-change.png"), t, "seconds (log)", &series(res, |r| r.noop.as_ref().ok().map(|c| c.wall_s)))?,
    );
    let t = "Retrieval quality on Cranfield dev";
    add("quality-cranfield.png", t, quality_chart(&dir.join("quality-cranfield.png"), res)?);
    Ok(out)
}
