//! Charts of the price of isolation, as standalone SVG like [`super::chart`]:
//!
//! - [`tradeoff`]: one point per runtime (and policy) and workload, victim IOPS kept
//!   (y, % of its baseline) against neighbour throughput kept (x, % of what they wrote
//!   alone), with the goal's corner shaded; axes end at 200 %, points beyond sit on
//!   the edge with their figure written beside them; points that would hide each
//!   other are moved apart by a few pixels (their tooltips keep the figures);
//! - [`log_bars`]: p99 latency in ms on a log axis, baseline beside noisy, so 0.25 ms
//!   and 400 ms read on one chart.

use super::chart::{COLOURS, esc, wrap_notes};

/// Point shapes, one per workload.
const SHAPES: [&str; 4] = ["circle", "square", "triangle", "diamond"];

/// One point of the trade-off chart: (x %, y %), runtime index (colour), workload
/// index (shape).
#[derive(Debug, Clone, PartialEq)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    pub runtime: usize,
    pub workload: usize,
    /// The neighbours' share under noise is below what the disk counters resolve
    /// (`nbr MB/s` 0 on a row whose figures reached the disk): drawn hollow, not as
    /// starved neighbours.
    pub hollow: bool,
}

/// Pixels apart two points must be to both show (a point's radius is 6).
const MIN_APART: f64 = 7.0;

/// Where the trade-off chart's axes end at most, %: a point beyond sits on the edge.
pub const AXIS_MAX_PCT: f64 = 200.0;

/// How a shape is drawn: fill and outline colours, outline width (px).
struct Paint<'a> {
    fill: &'a str,
    stroke: &'a str,
    width: f64,
}

/// A filled point with the usual dark outline.
fn filled(fill: &str) -> Paint<'_> {
    Paint {
        fill,
        stroke: "#222",
        width: 0.8,
    }
}

fn shape(kind: usize, cx: f64, cy: f64, paint: &Paint<'_>, tip: &str) -> String {
    let fill = paint.fill;
    let r = 6.0;
    let body = match SHAPES[kind % SHAPES.len()] {
        "circle" => format!("<circle cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"{r}\" fill=\"{fill}\""),
        "square" => format!(
            "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{fill}\"",
            cx - r,
            cy - r,
            2.0 * r,
            2.0 * r
        ),
        "triangle" => format!(
            "<polygon points=\"{cx:.1},{:.1} {:.1},{:.1} {:.1},{:.1}\" fill=\"{fill}\"",
            cy - r,
            cx - r,
            cy + r,
            cx + r,
            cy + r
        ),
        _ => format!(
            "<polygon points=\"{cx:.1},{:.1} {:.1},{cy:.1} {cx:.1},{:.1} {:.1},{cy:.1}\" fill=\"{fill}\"",
            cy - r,
            cx + r,
            cy + r,
            cx - r
        ),
    };
    format!(
        "{body} stroke=\"{}\" stroke-width=\"{}\"><title>{}</title></{}>\n",
        paint.stroke,
        paint.width,
        esc(tip),
        match SHAPES[kind % SHAPES.len()] {
            "circle" => "circle",
            "square" => "rect",
            _ => "polygon",
        }
    )
}

/// The trade-off scatter. `runtimes` and `workloads` name the colours and shapes;
/// `goal` is the (x, y) corner to shade (x ≥ goal.0 and y ≥ goal.1); `notes` go
/// under the legend. Axes run from 0 to at least 100 %.
pub fn tradeoff(
    title: &str,
    runtimes: &[String],
    workloads: &[String],
    points: &[Point],
    goal: (f64, f64),
    notes: &[String],
) -> String {
    // Axes to at least 100 % and at most 200 %: a point beyond sits on the edge (its
    // tooltip keeps the figure), so one outlier does not squash the others.
    let round_up = |v: f64| ((v.max(100.0) / 20.0).ceil() * 20.0).min(AXIS_MAX_PCT);
    let xmax = round_up(points.iter().map(|p| p.x).fold(0.0, f64::max));
    let ymax = round_up(points.iter().map(|p| p.y).fold(0.0, f64::max));
    let (left, top, w, h) = (70.0, 50.0, 420.0, 320.0);
    let legend_x = left + w + 30.0;
    let width = legend_x + 200.0;
    let legend_rows = runtimes.len() + workloads.len() + 1;
    let notes = wrap_notes(notes, width - left - 10.0);
    let height =
        (top + h + 60.0 + 18.0 * notes.len() as f64).max(top + 20.0 * legend_rows as f64 + 20.0);
    let x = |v: f64| left + v.clamp(0.0, xmax) / xmax * w;
    let y = |v: f64| top + h - v.clamp(0.0, ymax) / ymax * h;
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{left}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
        esc(title)
    );
    // The goal's corner.
    o.push_str(&format!(
        "<rect x=\"{:.1}\" y=\"{:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#009E73\" fill-opacity=\"0.12\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"#006644\">goal</text>\n",
        x(goal.0),
        y(ymax),
        x(xmax) - x(goal.0),
        y(goal.1) - y(ymax),
        x(goal.0) + 4.0,
        y(ymax) + 14.0
    ));
    for i in 0..=(xmax / 20.0) as usize {
        let v = i as f64 * 20.0;
        o.push_str(&format!(
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{top}\" y2=\"{1:.1}\" stroke=\"#ddd\"/><text x=\"{0:.1}\" y=\"{2:.1}\" text-anchor=\"middle\">{v:.0}</text>\n",
            x(v),
            top + h,
            top + h + 16.0
        ));
    }
    for i in 0..=(ymax / 20.0) as usize {
        let v = i as f64 * 20.0;
        o.push_str(&format!(
            "<line x1=\"{left}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{1:.1}\" stroke=\"#ddd\"/><text x=\"{2:.1}\" y=\"{3:.1}\" text-anchor=\"end\">{v:.0}</text>\n",
            left + w,
            y(v),
            left - 6.0,
            y(v) + 4.0
        ));
    }
    o.push_str(&format!(
        "<rect x=\"{left}\" y=\"{top}\" width=\"{w}\" height=\"{h}\" fill=\"none\" stroke=\"#333\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">neighbour throughput kept, % of alone</text>\n<text transform=\"translate(18,{:.1}) rotate(-90)\" text-anchor=\"middle\">victim IOPS kept, % of baseline</text>\n",
        left + w / 2.0,
        top + h + 36.0,
        top + h / 2.0
    ));
    let mut placed: Vec<(f64, f64)> = Vec::new();
    for p in points {
        let tip = format!(
            "{} {}: victim {:.0}%, neighbours {:.0}%{}",
            runtimes.get(p.runtime).map_or("?", String::as_str),
            workloads.get(p.workload).map_or("?", String::as_str),
            p.y,
            p.x,
            if p.hollow {
                " (below what the disk counters resolve)"
            } else {
                ""
            }
        );
        let (mut cx, mut cy) = (x(p.x), y(p.y));
        // Moved diagonally towards the plot's centre until free, so a point on an
        // edge or in a corner stays inside the frame.
        let (dx, dy) = (
            (left + w / 2.0 - cx).signum() * MIN_APART * 0.75,
            (top + h / 2.0 - cy).signum() * MIN_APART * 0.75,
        );
        while placed
            .iter()
            .any(|(px, py)| (px - cx).abs() < MIN_APART && (py - cy).abs() < MIN_APART)
        {
            cx += dx;
            cy += dy;
        }
        placed.push((cx, cy));
        let colour = COLOURS[p.runtime % COLOURS.len()];
        let paint = if p.hollow {
            // white inside, the runtime's colour on the outline
            Paint {
                fill: "#fff",
                stroke: colour,
                width: 2.0,
            }
        } else {
            filled(colour)
        };
        o.push_str(&shape(p.workload, cx, cy, &paint, &tip));
        let beyond: Vec<String> = [(p.x, xmax, "x"), (p.y, ymax, "y")]
            .iter()
            .filter(|(v, max, _)| v > max)
            .map(|(v, _, axis)| format!("{axis} {v:.0}%"))
            .collect();
        if !beyond.is_empty() {
            // Left of the point, unless that would cover the y axis's tick labels.
            let (lx, anchor) = if cx - left < 60.0 {
                (cx + 8.0, "start")
            } else {
                (cx - 8.0, "end")
            };
            o.push_str(&format!(
                "<text x=\"{lx:.1}\" y=\"{:.1}\" font-size=\"10\" text-anchor=\"{anchor}\">{}</text>\n",
                cy + 3.5,
                esc(&beyond.join(" "))
            ));
        }
    }
    // Legend: runtimes by colour, workloads by shape.
    let mut ly = top + 4.0;
    for (i, r) in runtimes.iter().enumerate() {
        o.push_str(&format!(
            "<rect x=\"{legend_x}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{ly:.1}\">{}</text>\n",
            ly - 10.0,
            COLOURS[i % COLOURS.len()],
            legend_x + 18.0,
            esc(r)
        ));
        ly += 20.0;
    }
    ly += 10.0;
    for (i, wl) in workloads.iter().enumerate() {
        o.push_str(&shape(i, legend_x + 6.0, ly - 4.0, &filled("#fff"), wl));
        o.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{ly:.1}\">{}</text>\n",
            legend_x + 18.0,
            esc(wl)
        ));
        ly += 20.0;
    }
    for (i, n) in notes.iter().enumerate() {
        o.push_str(&format!(
            "<text x=\"{left}\" y=\"{:.1}\" font-size=\"11\">{}</text>\n",
            top + h + 60.0 + 18.0 * i as f64,
            esc(n)
        ));
    }
    o.push_str("</svg>\n");
    o
}

/// One series of [`log_bars`]: its name, its colour index, whether it is pale (the
/// baseline), and one optional value (ms) per group.
pub type LogSeries = (String, usize, bool, Vec<Option<f64>>);

/// Grouped bars on a log axis: `groups` along x, one bar per series; values in the
/// unit `y_label` names, > 0 (others are left out). Decades from below the smallest
/// value to above the largest.
pub fn log_bars(
    title: &str,
    y_label: &str,
    groups: &[String],
    series: &[LogSeries],
    notes: &[String],
) -> String {
    let values: Vec<f64> = series
        .iter()
        .flat_map(|s| s.3.iter().flatten().copied())
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let lo = values.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = values.iter().copied().fold(0.0_f64, f64::max);
    let (lo_dec, hi_dec) = if values.is_empty() {
        (-1, 1)
    } else {
        let l = lo.log10().floor() as i32;
        let h = (hi.log10().ceil() as i32).max(l + 1);
        (l, h)
    };
    let (left, right, top, plot_h) = (70.0, 20.0, 50.0, 280.0);
    let bar_w = 14.0;
    let group_w = (series.len().max(1) as f64 * bar_w + 30.0).max(100.0);
    let width = (left + right + group_w * groups.len().max(1) as f64).max(640.0);
    let notes = wrap_notes(notes, width - left - 10.0);
    let legend_h = 20.0 * (series.len() + notes.len()) as f64;
    let height = top + plot_h + 50.0 + legend_h;
    let span = f64::from(hi_dec - lo_dec);
    let y = |v: f64| top + (f64::from(hi_dec) - v.log10()) / span * plot_h;
    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{left}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">{}</text>\n",
        esc(title)
    );
    for d in lo_dec..=hi_dec {
        let v = 10f64.powi(d);
        let ty = y(v);
        let label = if d >= 0 {
            format!("{v:.0}")
        } else {
            format!("{v:.*}", (-d) as usize)
        };
        o.push_str(&format!(
            "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{ty:.1}\" y2=\"{ty:.1}\" stroke=\"#ccc\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{label}</text>\n",
            width - right,
            left - 6.0,
            ty + 4.0
        ));
        if d < hi_dec {
            for m in [2.0, 5.0] {
                let my = y(v * m);
                o.push_str(&format!(
                    "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{my:.1}\" y2=\"{my:.1}\" stroke=\"#eee\"/>\n",
                    width - right
                ));
            }
        }
    }
    o.push_str(&format!(
        "<text transform=\"translate(16,{:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
        top + plot_h / 2.0,
        esc(y_label)
    ));
    let floor = y(10f64.powi(lo_dec));
    for (gi, g) in groups.iter().enumerate() {
        let gx = left + gi as f64 * group_w + 15.0;
        for (si, (name, colour, pale, vals)) in series.iter().enumerate() {
            let Some(v) = vals
                .get(gi)
                .copied()
                .flatten()
                .filter(|v| v.is_finite() && *v > 0.0)
            else {
                continue;
            };
            let x = gx + si as f64 * bar_w;
            let y0 = y(v);
            o.push_str(&format!(
                "<rect x=\"{x:.1}\" y=\"{y0:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"{}><title>{} {}: {v:.3}</title></rect>\n",
                bar_w - 2.0,
                (floor - y0).max(0.5),
                COLOURS[colour % COLOURS.len()],
                if *pale { " fill-opacity=\"0.4\"" } else { "" },
                esc(g),
                esc(name)
            ));
        }
        o.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            gx + series.len() as f64 * bar_w / 2.0,
            top + plot_h + 18.0,
            esc(g)
        ));
    }
    o.push_str(&format!(
        "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{floor:.1}\" y2=\"{floor:.1}\" stroke=\"#333\"/>\n",
        width - right
    ));
    for (si, (name, colour, pale, _)) in series.iter().enumerate() {
        let ly = top + plot_h + 40.0 + si as f64 * 20.0;
        o.push_str(&format!(
            "<rect x=\"{left}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"{}/><text x=\"{:.1}\" y=\"{ly:.1}\">{}</text>\n",
            ly - 10.0,
            COLOURS[colour % COLOURS.len()],
            if *pale { " fill-opacity=\"0.4\"" } else { "" },
            left + 18.0,
            esc(name)
        ));
    }
    for (ni, note) in notes.iter().enumerate() {
        let ly = top + plot_h + 40.0 + (series.len() + ni) as f64 * 20.0;
        o.push_str(&format!(
            "<text x=\"{left}\" y=\"{ly:.1}\" font-size=\"11\">{}</text>\n",
            esc(note)
        ));
    }
    o.push_str("</svg>\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tradeoff_points_and_goal() {
        let rts = vec!["runc".to_string(), "siloc-latency".to_string()];
        let wls = vec!["randrw".to_string(), "seqread".to_string()];
        let pts = vec![
            Point {
                x: 95.0,
                y: 5.0,
                runtime: 0,
                workload: 0,
                hollow: false,
            },
            Point {
                x: 80.0,
                y: 120.0,
                runtime: 1,
                workload: 1,
                hollow: false,
            },
        ];
        let svg = tradeoff("t", &rts, &wls, &pts, (70.0, 90.0), &["n<1".to_string()]);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<title>").count(), 2 + 2, "{svg}"); // points + shape keys
        assert!(svg.contains("runc randrw: victim 5%, neighbours 95%"));
        assert!(svg.contains(">goal<") && svg.contains("n&lt;1"));
        // y runs past 100 to hold the 120 % point
        assert!(svg.contains(">140<") || svg.contains(">120<"), "{svg}");
        assert!(
            !svg.contains("x 9") && !svg.contains("y 1"),
            "nothing beyond: {svg}"
        );
    }

    #[test]
    fn tradeoff_shows_points_beyond_the_edge_apart_and_hollow() {
        let rts = vec!["siloc".to_string(), "runc".to_string(), "crun".to_string()];
        let wls = vec!["randrw".to_string()];
        let p = |x, y, runtime, hollow| Point {
            x,
            y,
            runtime,
            workload: 0,
            hollow,
        };
        // three at 250-330 % x, 0 % y: all on the 200 % edge at the bottom
        let pts = vec![
            p(250.0, 0.0, 0, false),
            p(290.0, 0.0, 1, false),
            p(330.0, 0.0, 2, false),
            p(0.0, 95.0, 0, true),
        ];
        let long = format!("skipped x: {}", "reason ".repeat(40));
        let svg = tradeoff("t", &rts, &wls, &pts, (70.0, 90.0), &[long]);
        assert!(
            svg.contains(">x 250%<") && svg.contains(">x 330%<"),
            "{svg}"
        );
        let centres: Vec<&str> = svg
            .lines()
            .filter(|l| l.starts_with("<circle") && l.contains("victim 0%"))
            .map(|l| l.split('"').nth(1).unwrap())
            .collect();
        assert_eq!(centres.len(), 3, "{svg}");
        assert!(
            centres[0] != centres[1] && centres[1] != centres[2],
            "{centres:?}"
        );
        assert!(svg.contains("fill=\"#fff\" stroke=\"#0072B2\"") && svg.contains("(below what"));
        // the long note is wrapped: no text line wider than the SVG
        assert!(
            svg.lines()
                .filter(|l| l.contains("reason"))
                .all(|l| l.len() < 200),
            "{svg}"
        );
    }

    #[test]
    fn log_bars_span_decades() {
        let g = vec!["runc".to_string()];
        let s = vec![
            ("randrw baseline".to_string(), 0, true, vec![Some(0.25)]),
            ("randrw noisy".to_string(), 0, false, vec![Some(410.0)]),
            ("x".to_string(), 1, false, vec![None]),
        ];
        let svg = log_bars("p99", "p99 ms", &g, &s, &[]);
        assert!(svg.contains(">0.1<") && svg.contains(">1000<"), "{svg}");
        assert_eq!(svg.matches("<rect x=").count(), 2 + 3, "{svg}"); // bars + keys
        assert_eq!(svg.matches("fill-opacity=\"0.4\"").count(), 2);
        assert!(log_bars("e", "y", &[], &[], &[]).contains("</svg>"));
    }
}
