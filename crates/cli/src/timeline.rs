//! `leaderlock history --svg`: who led each key over a time range, as one
//! SVG picture to read at a glance in a postmortem. One lane per key (a key
//! of many slots, or a job, gets as many rows as tenures overlapped), one
//! bar per tenure from its `acquired` to its `released` or `expired`,
//! coloured by holder, labelled with holder and term; an expiry ends in a
//! red mark, a forced release in an orange one, a missed run is a grey
//! mark. A tenure that began before the range starts at its left edge, one
//! still held at its end runs to its right edge.
//!
//! Keys and holders were written by other roles: they go into text nodes
//! only (the svg crate escapes `&`, `<` and `>` there), already through
//! `text::shown` (no control character, which XML cannot hold even
//! escaped); every attribute is a number or a colour made here.
use std::collections::HashMap;

use chrono::{DateTime, Utc};
use svg::node::element::{Group, Line, Rectangle, Text, Title};
use svg::Document;

use crate::text;

/// One transition, as `history` reads it.
#[derive(Clone, Debug)]
pub struct Row {
    pub at: DateTime<Utc>,
    pub event: String,
    pub key: String,
    pub holder: Option<String>,
    pub term: Option<i64>,
    /// The expiry's reason, a release's "forced", a run's outcome.
    pub detail: Option<String>,
}

/// A tenure on a lane row, in microseconds from the range's start.
#[derive(Debug, PartialEq)]
struct Bar {
    holder: String,
    term: Option<i64>,
    start: f64,
    end: f64,
    /// "expired", "forced", or None (released, or still held).
    ended: Option<&'static str>,
    row: usize,
}

const LEFT: f64 = 220.0; // key labels
const WIDTH: f64 = 1000.0; // the time axis
const ROW: f64 = 22.0;
const TOP: f64 = 40.0;
const LABEL_CHARS: usize = 30;

/// Colour-blind-safe palette (Okabe and Ito), then its lighter tints.
const PALETTE: [&str; 12] = [
    "#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
    "#7FB8D8", "#F2CF7F", "#7FCEB9", "#E5BCD3",
];

/// The SVG of `rows` (in position order) between `from` and `to`.
pub fn render(rows: &[Row], from: DateTime<Utc>, to: DateTime<Utc>) -> String {
    let span = (to - from).num_microseconds().unwrap_or(1).max(1) as f64;
    let x = |t: DateTime<Utc>| -> f64 {
        let us = (t - from).num_microseconds().unwrap_or(0) as f64;
        (us / span).clamp(0.0, 1.0) * WIDTH
    };
    let lanes = lanes(rows, &x);
    let mut colours: HashMap<&str, &str> = HashMap::new();
    for (_, bars, _) in &lanes {
        for b in bars {
            let n = colours.len();
            colours
                .entry(b.holder.as_str())
                .or_insert(PALETTE[n % PALETTE.len()]);
        }
    }
    let mut doc = Document::new();
    let mut y = TOP;
    let mut body = Group::new();
    for (key, bars, marks) in &lanes {
        let rows_here = bars.iter().map(|b| b.row + 1).max().unwrap_or(1);
        let height = rows_here as f64 * ROW;
        body = body
            .add(
                Rectangle::new()
                    .set("x", LEFT)
                    .set("y", y)
                    .set("width", WIDTH)
                    .set("height", height)
                    .set("fill", "#f4f4f4"),
            )
            .add(
                Text::new(text::cut(&text::shown(key), LABEL_CHARS))
                    .set("x", LEFT - 8.0)
                    .set("y", y + ROW * 0.7)
                    .set("text-anchor", "end")
                    .set("font-size", 12),
            );
        for b in bars {
            let top = y + b.row as f64 * ROW + 2.0;
            let colour = colours[b.holder.as_str()];
            let label = match b.term {
                Some(t) => format!("{} · term {t}", text::shown(&b.holder)),
                None => text::shown(&b.holder),
            };
            let w = (b.end - b.start).max(1.0);
            let mut bar = Group::new().add(Title::new(label.clone())).add(
                Rectangle::new()
                    .set("x", LEFT + b.start)
                    .set("y", top)
                    .set("width", w)
                    .set("height", ROW - 4.0)
                    .set("fill", colour),
            );
            // A label only where it fits (about 6.5 px a character).
            if w > 6.5 * label.chars().count() as f64 + 8.0 {
                bar = bar.add(
                    Text::new(label)
                        .set("x", LEFT + b.start + 4.0)
                        .set("y", top + ROW * 0.6)
                        .set("font-size", 11)
                        .set("fill", ink(colour)),
                );
            }
            if let Some(how) = b.ended {
                bar = bar.add(
                    Rectangle::new()
                        .set("x", LEFT + b.end - 3.0)
                        .set("y", top)
                        .set("width", 3)
                        .set("height", ROW - 4.0)
                        .set(
                            "fill",
                            if how == "expired" {
                                "#d00000"
                            } else {
                                "#ff8c00"
                            },
                        ),
                );
            }
            body = body.add(bar);
        }
        for &m in marks {
            body = body.add(
                Line::new()
                    .set("x1", LEFT + m)
                    .set("x2", LEFT + m)
                    .set("y1", y)
                    .set("y2", y + height)
                    .set("stroke", "#808080")
                    .set("stroke-width", 2),
            );
        }
        y += height + 6.0;
    }
    // The time axis: five ticks, UTC.
    let mut axis = Group::new().add(
        Line::new()
            .set("x1", LEFT)
            .set("x2", LEFT + WIDTH)
            .set("y1", TOP - 6.0)
            .set("y2", TOP - 6.0)
            .set("stroke", "#000000"),
    );
    for i in 0..=4 {
        let t = from + chrono::Duration::microseconds((span * i as f64 / 4.0) as i64);
        let at = LEFT + WIDTH * i as f64 / 4.0;
        axis = axis.add(
            Text::new(t.format("%Y-%m-%d %H:%M:%S%.3f").to_string())
                .set("x", at)
                .set("y", TOP - 12.0)
                .set(
                    "text-anchor",
                    if i == 0 {
                        "start"
                    } else if i == 4 {
                        "end"
                    } else {
                        "middle"
                    },
                )
                .set("font-size", 10),
        );
    }
    // The legend: each holder's colour.
    let mut legend = Group::new();
    let mut lx = LEFT;
    let mut holders: Vec<(&&str, &&str)> = colours.iter().collect();
    holders.sort();
    for (holder, colour) in holders {
        let name = text::cut(&text::shown(holder), LABEL_CHARS);
        legend = legend
            .add(
                Rectangle::new()
                    .set("x", lx)
                    .set("y", y + 8.0)
                    .set("width", 12)
                    .set("height", 12)
                    .set("fill", *colour),
            )
            .add(
                Text::new(name.clone())
                    .set("x", lx + 16.0)
                    .set("y", y + 18.0)
                    .set("font-size", 11),
            );
        lx += 16.0 + 7.0 * name.chars().count() as f64 + 16.0;
    }
    let height = y + 30.0;
    let total_width = (LEFT + WIDTH + 20.0).max(lx);
    doc = doc
        .set("viewBox", (0, 0, total_width, height))
        .set("width", total_width)
        .set("height", height)
        .set("font-family", "sans-serif")
        .add(
            Rectangle::new()
                .set("width", total_width)
                .set("height", height)
                .set("fill", "#ffffff"),
        )
        .add(axis)
        .add(body)
        .add(legend);
    doc.to_string()
}

/// Keys in order of first appearance, each with its tenures (on rows that
/// never overlap) and its marks (missed runs).
fn lanes(rows: &[Row], x: &dyn Fn(DateTime<Utc>) -> f64) -> Vec<(String, Vec<Bar>, Vec<f64>)> {
    let mut order: Vec<String> = Vec::new();
    let mut open: HashMap<String, Vec<Bar>> = HashMap::new();
    let mut done: HashMap<String, Vec<Bar>> = HashMap::new();
    let mut marks: HashMap<String, Vec<f64>> = HashMap::new();
    for r in rows {
        if !done.contains_key(&r.key) {
            order.push(r.key.clone());
            done.insert(r.key.clone(), Vec::new());
        }
        let at = x(r.at);
        let holder = r.holder.clone().unwrap_or_default();
        match r.event.as_str() {
            "acquired" | "run_claimed" => {
                open.entry(r.key.clone()).or_default().push(Bar {
                    holder,
                    term: r.term,
                    start: at,
                    end: at,
                    ended: None,
                    row: 0,
                });
            }
            "released" | "expired" | "run_finished" => {
                let tenures = open.entry(r.key.clone()).or_default();
                let found = tenures
                    .iter()
                    .position(|b| b.holder == holder && b.term == r.term);
                let mut bar = match found {
                    Some(i) => tenures.remove(i),
                    // began before the range
                    None => Bar {
                        holder,
                        term: r.term,
                        start: 0.0,
                        end: at,
                        ended: None,
                        row: 0,
                    },
                };
                bar.end = at;
                bar.ended = match (r.event.as_str(), r.detail.as_deref()) {
                    ("expired", _) => Some("expired"),
                    ("released", Some("forced")) => Some("forced"),
                    _ => None,
                };
                done.get_mut(&r.key).expect("inserted above").push(bar);
            }
            "run_missed" => marks.entry(r.key.clone()).or_default().push(at),
            _ => {} // proclaimed: same tenure
        }
    }
    order
        .into_iter()
        .map(|key| {
            let mut bars = done.remove(&key).unwrap_or_default();
            for mut b in open.remove(&key).unwrap_or_default() {
                b.end = WIDTH; // still held at the range's end
                bars.push(b);
            }
            bars.sort_by(|a, b| a.start.total_cmp(&b.start));
            // Each bar on the first row free at its start.
            let mut row_ends: Vec<f64> = Vec::new();
            for b in &mut bars {
                let row = row_ends.iter().position(|&end| end <= b.start);
                b.row = match row {
                    Some(i) => i,
                    None => {
                        row_ends.push(0.0);
                        row_ends.len() - 1
                    }
                };
                row_ends[b.row] = b.end;
            }
            let marks = marks.remove(&key).unwrap_or_default();
            (key, bars, marks)
        })
        .collect()
}

/// Black or white, whichever reads on `colour`.
fn ink(colour: &str) -> &'static str {
    let c = |i: usize| u8::from_str_radix(&colour[i..i + 2], 16).unwrap_or(0) as f64;
    if 0.299 * c(1) + 0.587 * c(3) + 0.114 * c(5) > 150.0 {
        "#000000"
    } else {
        "#ffffff"
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(
        secs: i64,
        event: &str,
        key: &str,
        holder: &str,
        term: i64,
        detail: Option<&str>,
    ) -> Row {
        Row {
            at: DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap(),
            event: event.into(),
            key: key.into(),
            holder: Some(holder.into()),
            term: Some(term),
            detail: detail.map(Into::into),
        }
    }

    fn t(secs: i64) -> DateTime<Utc> {
        DateTime::from_timestamp(1_800_000_000 + secs, 0).unwrap()
    }

    #[test]
    fn tenures_become_bars_on_rows_that_never_overlap() {
        let rows = [
            row(10, "acquired", "k", "a", 1, None),
            row(40, "expired", "k", "a", 1, Some("ttl")),
            row(50, "acquired", "k", "b", 2, None),
            // a key of two slots: overlapping tenures on two rows
            row(0, "acquired", "s", "x", 1, None),
            row(5, "acquired", "s", "y", 2, None),
            row(20, "released", "s", "x", 1, Some("forced")),
            // a tenure that began before the range
            row(30, "released", "old", "z", 7, None),
        ];
        let l = lanes(&rows, &|at| (at - t(0)).num_seconds() as f64);
        assert_eq!(
            l.iter().map(|(k, ..)| k.as_str()).collect::<Vec<_>>(),
            ["k", "s", "old"]
        );
        let k = &l[0].1;
        assert_eq!(
            (k[0].start, k[0].end, k[0].ended, k[0].row),
            (10.0, 40.0, Some("expired"), 0)
        );
        assert_eq!(
            (k[1].start, k[1].end, k[1].ended, k[1].row),
            (50.0, WIDTH, None, 0)
        );
        let s = &l[1].1;
        assert_eq!(
            (s[0].holder.as_str(), s[0].row, s[0].ended),
            ("x", 0, Some("forced"))
        );
        assert_eq!((s[1].holder.as_str(), s[1].row), ("y", 1));
        assert_eq!((l[2].1[0].start, l[2].1[0].end), (0.0, 30.0));
    }

    #[test]
    fn names_from_the_database_are_escaped_text_never_markup() {
        let evil = "<script>alert(1)</script>\u{1b}]52;c;x\u{7}\"&";
        let rows = [row(1, "acquired", evil, evil, 1, None)];
        let svg = render(&rows, t(0), t(100));
        assert!(!svg.contains("<script>"), "{svg}");
        assert!(!svg.contains('\u{1b}') && !svg.contains('\u{7}'));
        assert!(svg.contains("&lt;script&gt;"));
        // every attribute is ours: no quote from the name closes one
        assert!(!svg.contains("=\"\\\""), "{svg}");
    }
}
