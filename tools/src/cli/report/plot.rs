//! PNG line plots (plotters' bitmap backend, text drawn with the bundled
//! DejaVu Sans so no system font library is needed).

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;

use super::ReportError;

static FONT: &[u8] = include_bytes!("../../../../assets/fonts/DejaVuSans.ttf");

fn register_font() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bundled font is known-good; a failure would only lose text.
        let _ = plotters::style::register_font("sans-serif", FontStyle::Normal, FONT);
    });
}

/// One line of a plot.
#[derive(Debug, Clone)]
pub struct Series {
    /// Legend label.
    pub name: String,
    /// (x, y) points, drawn in order.
    pub points: Vec<(f64, f64)>,
}

/// One panel: a title, axis labels and its lines.
#[derive(Debug, Clone)]
pub struct LinePlot {
    /// Panel title.
    pub title: String,
    /// X axis label.
    pub x_label: String,
    /// Y axis label.
    pub y_label: String,
    /// Logarithmic x axis (base 2 spacing suits read sizes).
    pub log_x: bool,
    /// Logarithmic y axis.
    pub log_y: bool,
    /// The lines.
    pub series: Vec<Series>,
}

/// Draws `panels` side by side in a grid of `cols` columns into a PNG of
/// `width` x `height` pixels.
pub fn save_png(
    path: &Path,
    panels: &[LinePlot],
    cols: usize,
    width: u32,
    height: u32,
) -> Result<(), ReportError> {
    register_font();
    let err = |e: &dyn std::fmt::Display| ReportError::Plot {
        path: path.to_path_buf(),
        message: e.to_string(),
    };
    let root = BitMapBackend::new(path, (width, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let cols = cols.max(1);
    let rows = panels.len().div_ceil(cols).max(1);
    let areas = root.split_evenly((rows, cols));
    for (panel, area) in panels.iter().zip(areas.iter()) {
        draw_panel(area, panel).map_err(|e| err(&e))?;
    }
    root.present().map_err(|e| err(&e))?;
    Ok(())
}

fn bounds(panel: &LinePlot) -> (f64, f64, f64, f64) {
    let pts = panel.series.iter().flat_map(|s| s.points.iter());
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, f64::MIN, f64::MAX, f64::MIN);
    for &(x, y) in pts {
        if x.is_finite() && y.is_finite() {
            x0 = x0.min(x);
            x1 = x1.max(x);
            y0 = y0.min(y);
            y1 = y1.max(y);
        }
    }
    if x0 > x1 {
        return (1.0, 2.0, 1.0, 2.0);
    }
    let floor = |v: f64, log: bool| if log { v.max(1e-6) } else { v };
    let x0 = floor(x0, panel.log_x);
    let y0 = if panel.log_y {
        floor(y0, true) / 1.5
    } else {
        0.0
    };
    let x1 = if x1 <= x0 { x0 * 2.0 + 1.0 } else { x1 };
    let y1 = if y1 <= y0 { y0 * 2.0 + 1.0 } else { y1 * 1.1 };
    (x0, x1, y0, y1)
}

/// A tick label with as many decimals as its size needs (0.05, 1.5, 128).
fn tick(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 || a >= 10.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        format!("{v:.1}")
    } else if a >= 0.1 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

type DrawResult<T> =
    Result<T, DrawingAreaErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>>;

fn draw_panel(
    area: &DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>,
    p: &LinePlot,
) -> DrawResult<()> {
    let (x0, x1, y0, y1) = bounds(p);
    let mut b = ChartBuilder::on(area);
    b.caption(&p.title, ("sans-serif", 18))
        .margin(10)
        .x_label_area_size(40)
        .y_label_area_size(60);
    let colors = [
        RGBColor(31, 119, 180),
        RGBColor(255, 127, 14),
        RGBColor(44, 160, 44),
        RGBColor(214, 39, 40),
        RGBColor(148, 103, 189),
        RGBColor(140, 86, 75),
        RGBColor(227, 119, 194),
        RGBColor(80, 80, 80),
    ];
    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(p.x_label.as_str())
                .y_desc(p.y_label.as_str())
                .label_style(("sans-serif", 12))
                .light_line_style(WHITE)
                .x_label_formatter(&|v| tick(*v))
                .y_label_formatter(&|v| tick(*v))
                .draw()?;
            for (i, s) in p.series.iter().enumerate() {
                let c = colors[i % colors.len()];
                chart
                    .draw_series(LineSeries::new(s.points.iter().copied(), c.stroke_width(2)))?
                    .label(s.name.as_str())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2))
                    });
                chart.draw_series(s.points.iter().map(|&pt| Circle::new(pt, 3, c.filled())))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .label_font(("sans-serif", 12))
                .position(SeriesLabelPosition::UpperLeft)
                .draw()?;
        }};
    }
    match (p.log_x, p.log_y) {
        (true, true) => body!(b.build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())?),
        (true, false) => body!(b.build_cartesian_2d((x0..x1).log_scale(), y0..y1)?),
        (false, true) => body!(b.build_cartesian_2d(x0..x1, (y0..y1).log_scale())?),
        (false, false) => body!(b.build_cartesian_2d(x0..x1, y0..y1)?),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_a_png() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("plot.png");
        let panel = LinePlot {
            title: "test".into(),
            x_label: "KiB".into(),
            y_label: "MB/s".into(),
            log_x: true,
            log_y: false,
            series: vec![Series {
                name: "a".into(),
                points: vec![(4.0, 1.0), (64.0, 10.0), (1024.0, 12.0)],
            }],
        };
        save_png(&p, &[panel.clone(), panel], 2, 800, 300).unwrap();
        let bytes = std::fs::read(&p).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
    }
}
