//! Grouped bar charts as standalone SVG (no fonts or scripts needed to view them):
//! one group per runtime, one bar per series (workload, or workload x neighbour
//! size), a zero line, ticks, and a legend.

/// Series colours (colour-blind safe, Okabe–Ito).
pub(super) const COLOURS: [&str; 8] = [
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000",
];

/// Escapes text for SVG.
pub(super) fn esc(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Average width of a character of the notes' 11 px sans-serif, px (about 0.55 em).
const NOTE_CHAR_PX: f64 = 6.1;

/// `notes` wrapped at spaces into lines that fit `px` pixels of 11 px text, so a long
/// note (a skipped runtime's reason) is not cut off at the SVG's edge. A word longer
/// than a line gets a line of its own. (No indent: SVG text drops leading spaces.)
pub(super) fn wrap_notes(notes: &[String], px: f64) -> Vec<String> {
    let max = ((px / NOTE_CHAR_PX) as usize).max(20);
    let mut out = Vec::new();
    for n in notes {
        let mut line = String::new();
        for word in n.split(' ') {
            if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > max {
                out.push(std::mem::take(&mut line));
            } else if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
        out.push(line);
    }
    out
}

/// A step of 1, 2 or 5 x 10^n giving about 5 ticks over `span`.
fn tick_step(span: f64) -> f64 {
    if span <= 0.0 || !span.is_finite() {
        return 1.0;
    }
    let raw = span / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let n = raw / mag;
    let m = if n <= 1.0 {
        1.0
    } else if n <= 2.0 {
        2.0
    } else if n <= 5.0 {
        5.0
    } else {
        10.0
    };
    m * mag
}

/// One bar: its value and an optional mark written above it (a note's letter).
#[derive(Debug, Clone, PartialEq)]
pub struct Bar {
    pub value: f64,
    pub mark: Option<String>,
}

/// A named series: one optional bar per group.
pub type Series = (String, Vec<Option<Bar>>);

/// The chart: `groups` along x, for each group one bar per series (`None`: no bar).
/// Values are in the unit `y_label` names; negative values go below the zero line.
/// `notes` are printed under the legend (explaining the marks). Marked bars are pale.
pub fn grouped_bars(
    title: &str,
    y_label: &str,
    groups: &[String],
    series: &[Series],
    notes: &[String],
) -> String {
    let values: Vec<f64> = series
        .iter()
        .flat_map(|(_, v)| v.iter().flatten().map(|b| b.value))
        .filter(|v| v.is_finite())
        .collect();
    let hi = values.iter().copied().fold(0.0_f64, f64::max);
    let lo = values.iter().copied().fold(0.0_f64, f64::min);
    let step = tick_step(hi - lo);
    let top = (hi / step).ceil().max(if hi > 0.0 { 1.0 } else { 0.0 }) * step;
    let bottom = (lo / step).floor() * step;
    let span = if top - bottom > 0.0 {
        top - bottom
    } else {
        1.0
    };

    let (left, right, plot_top, plot_h) = (70.0, 20.0, 50.0, 280.0);
    let bar_w = 18.0;
    let n_series = series.len().max(1) as f64;
    let group_w = n_series * bar_w + 30.0;
    let width = left + right + group_w * groups.len().max(1) as f64;
    let notes = wrap_notes(notes, width - left - 10.0);
    let legend_h = 20.0 * (series.len() + notes.len()) as f64;
    let height = plot_top + plot_h + 50.0 + legend_h;
    let y = |v: f64| plot_top + (top - v) / span * plot_h;

    let mut o = format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width:.0}\" height=\"{height:.0}\" viewBox=\"0 0 {width:.0} {height:.0}\" font-family=\"sans-serif\" font-size=\"12\">\n"
    );
    o.push_str(&format!("<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n<text x=\"{left}\" y=\"24\" font-size=\"15\" font-weight=\"bold\">{}</text>\n", esc(title)));
    // Ticks and grid.
    let mut t = bottom;
    while t <= top + step / 2.0 {
        let ty = y(t);
        o.push_str(&format!(
            "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{ty:.1}\" y2=\"{ty:.1}\" stroke=\"#ddd\"/>\n<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"end\">{}</text>\n",
            width - right,
            left - 6.0,
            ty + 4.0,
            format_tick(t)
        ));
        t += step;
    }
    o.push_str(&format!(
        "<text transform=\"translate(16,{:.1}) rotate(-90)\" text-anchor=\"middle\">{}</text>\n",
        plot_top + plot_h / 2.0,
        esc(y_label)
    ));
    // Bars.
    for (gi, g) in groups.iter().enumerate() {
        let gx = left + gi as f64 * group_w + 15.0;
        for (si, (_, vals)) in series.iter().enumerate() {
            let Some(bar) = vals
                .get(gi)
                .and_then(Option::as_ref)
                .filter(|b| b.value.is_finite())
            else {
                continue;
            };
            let v = bar.value;
            let x = gx + si as f64 * bar_w;
            let (y0, y1) = (y(v.max(0.0)), y(v.min(0.0)));
            o.push_str(&format!(
                "<rect x=\"{x:.1}\" y=\"{y0:.1}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"{}\"{}><title>{}: {v:.0}</title></rect>\n",
                bar_w - 2.0,
                (y1 - y0).max(0.5),
                COLOURS[si % COLOURS.len()],
                if bar.mark.is_some() { " fill-opacity=\"0.45\"" } else { "" },
                esc(g)
            ));
            if let Some(m) = &bar.mark {
                o.push_str(&format!(
                    "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\" font-size=\"11\">{}</text>\n",
                    x + (bar_w - 2.0) / 2.0,
                    y0 - 4.0,
                    esc(m)
                ));
            }
        }
        o.push_str(&format!(
            "<text x=\"{:.1}\" y=\"{:.1}\" text-anchor=\"middle\">{}</text>\n",
            gx + n_series * bar_w / 2.0,
            plot_top + plot_h + 18.0,
            esc(g)
        ));
    }
    // Zero line on top of the bars.
    o.push_str(&format!(
        "<line x1=\"{left}\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#333\"/>\n",
        width - right,
        y(0.0),
        y(0.0)
    ));
    // Legend.
    for (si, (name, _)) in series.iter().enumerate() {
        let ly = plot_top + plot_h + 40.0 + si as f64 * 20.0;
        o.push_str(&format!(
            "<rect x=\"{left}\" y=\"{:.1}\" width=\"12\" height=\"12\" fill=\"{}\"/><text x=\"{:.1}\" y=\"{:.1}\">{}</text>\n",
            ly - 10.0,
            COLOURS[si % COLOURS.len()],
            left + 18.0,
            ly,
            esc(name)
        ));
    }
    for (ni, note) in notes.iter().enumerate() {
        let ly = plot_top + plot_h + 40.0 + (series.len() + ni) as f64 * 20.0;
        o.push_str(&format!(
            "<text x=\"{left}\" y=\"{ly:.1}\" font-size=\"11\">{}</text>\n",
            esc(note)
        ));
    }
    o.push_str("</svg>\n");
    o
}

fn format_tick(v: f64) -> String {
    if v.abs() >= 1.0 || v == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_notes_wrap_at_spaces() {
        let n = vec![
            "short".to_string(),
            "word ".repeat(30).trim_end().to_string(),
        ];
        let l = wrap_notes(&n, 20.0 * NOTE_CHAR_PX + 1.0);
        assert_eq!(l[0], "short");
        assert!(l.len() > 3, "{l:?}");
        assert!(l.iter().all(|x| x.chars().count() <= 20), "{l:?}");
        assert!(l[2].starts_with("word"), "{l:?}");
        let words: usize = l[1..].iter().map(|x| x.split_whitespace().count()).sum();
        assert_eq!(words, 30);
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(tick_step(100.0), 20.0);
        assert_eq!(tick_step(950.0), 200.0);
        assert_eq!(tick_step(7.0), 2.0);
        assert_eq!(tick_step(0.0), 1.0);
    }

    #[test]
    fn bars_for_each_value_and_escaped_names() {
        let groups = vec!["runc".to_string(), "a<b".to_string()];
        let bar = |value: f64, mark: Option<&str>| {
            Some(Bar {
                value,
                mark: mark.map(str::to_string),
            })
        };
        let series = vec![
            (
                "randrw".to_string(),
                vec![bar(95.0, None), bar(-10.0, Some("a"))],
            ),
            ("seqread".to_string(), vec![None, bar(40.0, None)]),
        ];
        let svg = grouped_bars(
            "IOPS drop",
            "drop %",
            &groups,
            &series,
            &["a: page cache".to_string()],
        );
        assert_eq!(svg.matches("<rect x=").count(), 3 + 2, "{svg}"); // 3 bars + 2 legend keys
        assert_eq!(svg.matches("fill-opacity").count(), 1);
        assert!(svg.contains(">a: page cache<"));
        assert!(svg.contains("a&lt;b") && !svg.contains("a<b"));
        assert!(
            svg.contains(">-20<") || svg.contains(">-10<") || svg.contains(">-50<"),
            "{svg}"
        );
        assert!(svg.trim_end().ends_with("</svg>"));
        let empty = grouped_bars("x", "y", &[], &[], &[]);
        assert!(empty.contains("</svg>"));
    }
}
