//! PNG plot of ms/frame against body count for both engines (plotters, bitmap backend).
//! Text uses DejaVu Sans embedded in the binary, so no system font is needed at run time.

use std::path::Path;
use std::sync::Once;

use plotters::prelude::*;
use plotters::style::{FontStyle, register_font};

static FONT: &[u8] = include_bytes!("../../../assets/DejaVuSans.ttf");

/// One measured case: bodies, median ms, scene, and whether its quality stayed within the
/// equal-quality threshold (drawn filled) or not (drawn hollow: a collapsed or exploded
/// scene, whose time is not comparable).
#[derive(Clone, Debug)]
pub struct Point {
    pub bodies: f64,
    pub ms: f64,
    pub scene: String,
    pub ok: bool,
}

/// Points per engine: the scaling series (drawn as lines, sorted by body count) and the
/// other scenes (drawn as labelled markers).
#[derive(Default)]
pub struct Series {
    pub avbd_scaling: Vec<Point>,
    pub rapier_scaling: Vec<Point>,
    pub avbd_other: Vec<Point>,
    pub rapier_other: Vec<Point>,
}

fn register() -> Result<(), String> {
    static ONCE: Once = Once::new();
    let mut result = Ok(());
    ONCE.call_once(|| {
        result = register_font("sans-serif", FontStyle::Normal, FONT)
            .map_err(|_| "the embedded font is not a valid TrueType font".to_string());
    });
    result
}

pub fn plot(path: &Path, s: &Series, machine: &str, threads: usize) -> Result<(), String> {
    register()?;
    let err = |e: &dyn std::fmt::Display| format!("plot {}: {e}", path.display());
    let all: Vec<(f64, f64)> = [
        &s.avbd_scaling,
        &s.rapier_scaling,
        &s.avbd_other,
        &s.rapier_other,
    ]
    .iter()
    .flat_map(|v| v.iter().map(|p| (p.bodies, p.ms)))
    .filter(|p| p.0 > 0.0 && p.1 > 0.0 && p.1.is_finite())
    .collect();
    if all.is_empty() {
        return Ok(());
    }
    let (mut x0, mut x1, mut y0, mut y1) = (f64::MAX, 0.0f64, f64::MAX, 0.0f64);
    for &(x, y) in &all {
        x0 = x0.min(x);
        x1 = x1.max(x);
        y0 = y0.min(y);
        y1 = y1.max(y);
    }
    let (x0, x1, y0, y1) = (x0 / 1.5, x1 * 1.5, y0 / 1.5, y1 * 1.5);

    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(&e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("ms per frame vs bodies — {machine}, {threads} threads"),
            ("sans-serif", 18),
        )
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(65)
        .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
        .map_err(|e| err(&e))?;
    chart
        .configure_mesh()
        .x_desc("bodies (log)")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y}"))
        .y_desc("median ms / frame (log)")
        .label_style(("sans-serif", 13))
        .axis_desc_style(("sans-serif", 15))
        .draw()
        .map_err(|e| err(&e))?;

    let avbd = RGBColor(200, 60, 40);
    let rapier = RGBColor(40, 90, 200);
    for (pts, color, name) in [
        (&s.avbd_scaling, avbd, "bevy_avbd, large_pyramid series"),
        (&s.rapier_scaling, rapier, "rapier3d, large_pyramid series"),
    ] {
        if pts.is_empty() {
            continue;
        }
        let mut pts = pts.clone();
        pts.sort_by(|a, b| a.bodies.total_cmp(&b.bodies));
        chart
            .draw_series(LineSeries::new(
                pts.iter().map(|p| (p.bodies, p.ms)),
                color.stroke_width(2),
            ))
            .map_err(|e| err(&e))?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|p| {
                let style = if p.ok { color.filled() } else { WHITE.filled() };
                EmptyElement::at((p.bodies, p.ms))
                    + Circle::new((0, 0), 5, style)
                    + Circle::new((0, 0), 5, color.stroke_width(2))
            }))
            .map_err(|e| err(&e))?;
    }
    for (pts, color, name) in [
        (&s.avbd_other, avbd, "bevy_avbd, other scenes"),
        (&s.rapier_other, rapier, "rapier3d, other scenes"),
    ] {
        if pts.is_empty() {
            continue;
        }
        chart
            .draw_series(pts.iter().map(|p| {
                // Triangles are always filled: a white inner triangle makes it hollow.
                let inner = if p.ok { 0 } else { 4 };
                EmptyElement::at((p.bodies, p.ms))
                    + TriangleMarker::new((0, 0), 7, color.filled())
                    + TriangleMarker::new((0, 1), inner, WHITE.filled())
                    + Text::new(
                        p.scene.clone(),
                        (8, -4),
                        ("sans-serif", 12).into_font().color(&color),
                    )
            }))
            .map_err(|e| err(&e))?
            .label(name)
            .legend(move |(x, y)| TriangleMarker::new((x + 10, y), 6, color.filled()));
    }
    // Legend entry for hollow markers.
    chart
        .draw_series(std::iter::once(Circle::new((x0, y0), 0, BLACK.filled())))
        .map_err(|e| err(&e))?
        .label("hollow marker: quality beyond the equal-quality threshold")
        .legend(|(x, y)| {
            EmptyElement::at((x + 10, y)) + Circle::new((0, 0), 5, BLACK.stroke_width(2))
        });
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .label_font(("sans-serif", 13))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(&e))?;
    root.present().map_err(|e| err(&e))?;
    Ok(())
}
