//! Pixel layout shared by the charts: the grid of small multiples and the placement of point
//! labels so that none collides with another label or a point. Pure arithmetic on boxes, so it
//! is tested without drawing.

/// A box in pixels: left, top, width, height.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rect {
    /// Left edge.
    pub x: i32,
    /// Top edge.
    pub y: i32,
    /// Width.
    pub w: i32,
    /// Height.
    pub h: i32,
}

impl Rect {
    /// A box from its corner and size.
    pub fn new(x: i32, y: i32, w: i32, h: i32) -> Rect {
        Rect { x, y, w, h }
    }

    /// Whether the two boxes share any pixel.
    pub fn overlaps(&self, o: &Rect) -> bool {
        self.x < o.x + o.w && o.x < self.x + self.w && self.y < o.y + o.h && o.y < self.y + self.h
    }

    /// Whether `self` lies wholly inside `o`.
    pub fn inside(&self, o: &Rect) -> bool {
        self.x >= o.x
            && self.y >= o.y
            && self.x + self.w <= o.x + o.w
            && self.y + self.h <= o.y + o.h
    }
}

/// Where one label went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed {
    /// The label's box (its text is drawn from the top-left corner).
    pub rect: Rect,
    /// A line from the point to the label, when no spot beside the point was free and the
    /// label went to the margin column.
    pub leader: Option<Segment>,
}

/// Places one label of `sizes[i]` pixels for each `points[i]` (a mark of radius `radii[i]`),
/// in order: the first of eight
/// spots around the point (right, left, above, below, then the diagonals) that stays inside
/// `plot` and covers no point and no earlier label; failing that, the free slot of `column`
/// (a strip beside the plot, one label per slot) nearest the point's height, with a leader
/// line. Slots continue below `column` when it is full: the caller sizes it for the count.
/// Deterministic: the same input always gives the same boxes.
pub fn place_labels(
    points: &[(i32, i32)],
    sizes: &[(i32, i32)],
    radii: &[i32],
    plot: Rect,
    column: Rect,
) -> Vec<Placed> {
    let marks: Vec<Rect> = points
        .iter()
        .zip(radii)
        .map(|(&(x, y), &r)| Rect::new(x - r, y - r, 2 * r, 2 * r))
        .collect();
    let slot_h = sizes.iter().map(|s| s.1).max().unwrap_or(12) + 4;
    let mut taken_slots: Vec<i32> = Vec::new();
    let mut placed: Vec<Placed> = Vec::with_capacity(points.len());
    for ((&(px, py), &(w, h)), &marker_r) in points.iter().zip(sizes).zip(radii) {
        let g = marker_r + 3;
        let spots = [
            (px + g, py - h / 2),
            (px - g - w, py - h / 2),
            (px - w / 2, py - g - h),
            (px - w / 2, py + g),
            (px + g, py - g - h),
            (px + g, py + g),
            (px - g - w, py - g - h),
            (px - g - w, py + g),
        ];
        let free = spots.iter().map(|&(x, y)| Rect::new(x, y, w, h)).find(|r| {
            r.inside(&plot)
                && !marks.iter().any(|m| m.overlaps(r))
                && !placed.iter().any(|p| p.rect.overlaps(r))
        });
        if let Some(rect) = free {
            placed.push(Placed { rect, leader: None });
            continue;
        }
        let slots = (column.h / slot_h).max(1);
        let wanted = ((py - column.y) / slot_h).clamp(0, slots - 1);
        // The nearest free slot inside the column, else the first one below it.
        let slot = (0..slots)
            .filter(|s| !taken_slots.contains(s))
            .min_by_key(|s| ((s - wanted).abs(), *s))
            .unwrap_or_else(|| {
                (slots..)
                    .find(|s| !taken_slots.contains(s))
                    .unwrap_or(slots)
            });
        taken_slots.push(slot);
        let rect = Rect::new(column.x + 8, column.y + slot * slot_h + 2, w, h);
        placed.push(Placed {
            rect,
            leader: Some(((px + marker_r, py), (rect.x - 3, rect.y + h / 2))),
        });
    }
    placed
}

/// A point in pixels.
pub type Px = (i32, i32);
/// A line segment in pixels, end to end.
pub type Segment = (Px, Px);

/// Whether the segment from `a` to `b` passes through `r`.
fn crosses(r: &Rect, a: (i32, i32), b: (i32, i32)) -> bool {
    let inside = |(x, y): (i32, i32)| x >= r.x && x <= r.x + r.w && y >= r.y && y <= r.y + r.h;
    if inside(a) || inside(b) {
        return true;
    }
    // Clip the segment's parameter range to the box (Liang–Barsky).
    let (dx, dy) = ((b.0 - a.0) as f64, (b.1 - a.1) as f64);
    let (mut t0, mut t1) = (0f64, 1f64);
    for (p, q) in [
        (-dx, (a.0 - r.x) as f64),
        (dx, (r.x + r.w - a.0) as f64),
        (-dy, (a.1 - r.y) as f64),
        (dy, (r.y + r.h - a.1) as f64),
    ] {
        if p == 0.0 {
            if q < 0.0 {
                return false;
            }
        } else {
            let t = q / p;
            if p < 0.0 {
                t0 = t0.max(t);
            } else {
                t1 = t1.min(t);
            }
        }
    }
    t0 <= t1
}

/// The candidate box that covers the fewest points and line segments (the first of equals):
/// where a label on a reference line (the SLO) hides the least data.
pub fn least_covered(candidates: &[Rect], points: &[Px], segments: &[Segment]) -> usize {
    let cost = |r: &Rect| {
        let hit_points = points
            .iter()
            .filter(|&&(x, y)| Rect::new(x - 6, y - 6, 12, 12).overlaps(r))
            .count();
        let hit_lines = segments.iter().filter(|(a, b)| crosses(r, *a, *b)).count();
        hit_points * 2 + hit_lines
    };
    (0..candidates.len())
        .min_by_key(|&i| (cost(&candidates[i]), i))
        .unwrap_or(0)
}

/// Radii of point marks of radius `r` so that coincident points stay visible: a point with
/// `c` later points within `r` pixels is drawn `2c` pixels larger (at most 16), and drawn
/// first, so a stack of points shows as concentric marks, each exactly where it belongs.
pub fn stacked_radii(points: &[(i32, i32)], r: i32) -> Vec<i32> {
    points
        .iter()
        .enumerate()
        .map(|(i, &(x, y))| {
            let later = points[i + 1..]
                .iter()
                .filter(|&&(u, v)| (u - x).pow(2) + (v - y).pow(2) <= r * r)
                .count() as i32;
            r + 2 * later.min(8)
        })
        .collect()
}

/// Columns of a grid of small multiples for `n` panels: one panel spans the width.
pub fn grid_columns(n: usize, max_columns: usize) -> usize {
    n.clamp(1, max_columns.max(1))
}

/// The boxes of `heights.len()` panels in a grid `columns` wide under a header, each row as tall
/// as its tallest panel: returns the boxes and the total height.
pub fn grid(width: i32, header_h: i32, columns: usize, heights: &[i32]) -> (Vec<Rect>, i32) {
    let columns = columns.max(1);
    let col_w = width / columns as i32;
    let mut rects = Vec::with_capacity(heights.len());
    let mut top = header_h;
    for row in heights.chunks(columns) {
        let row_h = row.iter().copied().max().unwrap_or(0);
        for c in 0..row.len() {
            rects.push(Rect::new(c as i32 * col_w, top, col_w, row_h));
        }
        top += row_h;
    }
    (rects, top)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_overlaps(placed: &[Placed]) {
        for (i, a) in placed.iter().enumerate() {
            for b in &placed[i + 1..] {
                assert!(!a.rect.overlaps(&b.rect), "{a:?} overlaps {b:?}");
            }
        }
    }

    #[test]
    fn a_lone_point_is_labelled_on_its_right_without_a_leader() {
        let plot = Rect::new(0, 0, 400, 300);
        let column = Rect::new(410, 0, 150, 300);
        let p = place_labels(&[(100, 100)], &[(60, 14)], &[6], plot, column);
        assert_eq!(p[0].rect, Rect::new(109, 93, 60, 14));
        assert_eq!(p[0].leader, None);
    }

    #[test]
    fn a_point_at_the_right_edge_is_labelled_on_its_left() {
        let plot = Rect::new(0, 0, 400, 300);
        let column = Rect::new(410, 0, 150, 300);
        let p = place_labels(&[(395, 100)], &[(60, 14)], &[6], plot, column);
        assert!(p[0].rect.inside(&plot) && p[0].rect.x + 60 < 395, "{p:?}");
    }

    #[test]
    fn thirty_labels_on_one_spot_never_collide_and_stay_in_their_column() {
        let plot = Rect::new(60, 20, 500, 300);
        let column = Rect::new(570, 20, 200, 30 * 18);
        let points: Vec<(i32, i32)> = (0..30).map(|i| (300 + i % 3, 150 + i % 2)).collect();
        let sizes: Vec<(i32, i32)> = (0..30).map(|i| (80 + 5 * (i % 7), 14)).collect();
        let radii = stacked_radii(&points, 6);
        assert_eq!(
            radii[0],
            6 + 16,
            "every later point is within 6 px; the growth is capped"
        );
        assert_eq!(radii[28], 6 + 2, "one later point");
        let p = place_labels(&points, &sizes, &radii, plot, column);
        no_overlaps(&p);
        let beside = p.iter().filter(|p| p.leader.is_none()).count();
        assert!((1..=8).contains(&beside), "{beside} beside the cluster");
        for q in p.iter().filter(|p| p.leader.is_some()) {
            assert!(q.rect.x >= column.x && q.rect.y + q.rect.h <= column.y + column.h);
        }
    }

    #[test]
    fn a_full_column_continues_below_rather_than_overlapping() {
        let plot = Rect::new(0, 0, 50, 50);
        let column = Rect::new(60, 0, 100, 36);
        let points = [(25, 25); 6];
        let p = place_labels(&points, &[(90, 14); 6], &[6; 6], plot, column);
        no_overlaps(&p);
        assert!(p.iter().all(|p| p.leader.is_some()));
    }

    #[test]
    fn a_reference_label_goes_where_it_hides_no_data() {
        let boxes = [
            Rect::new(0, 0, 50, 10),
            Rect::new(100, 0, 50, 10),
            Rect::new(200, 0, 50, 10),
        ];
        // A line through the first box, a point in the second: the third is free.
        let lines = [((-10, 5), (60, 5))];
        assert_eq!(least_covered(&boxes, &[(120, 5)], &lines), 2);
        // A steep line crosses the third box without an end in it: each box now hides
        // something, and a point costs more than a line.
        let lines = [((-10, 5), (60, 5)), ((225, -40), (226, 50))];
        assert_eq!(least_covered(&boxes, &[(120, 5)], &lines), 0);
        assert_eq!(least_covered(&boxes, &[(20, 5)], &lines), 1);
        assert_eq!(least_covered(&boxes, &[], &[]), 0, "all free: the first");
    }

    #[test]
    fn grid_rows_take_their_tallest_panel() {
        let (rects, total) = grid(1000, 40, 2, &[300, 350, 200]);
        assert_eq!(rects[0], Rect::new(0, 40, 500, 350));
        assert_eq!(rects[1], Rect::new(500, 40, 500, 350));
        assert_eq!(rects[2], Rect::new(0, 390, 500, 200));
        assert_eq!(total, 590);
        assert_eq!(grid_columns(1, 2), 1);
        assert_eq!(grid_columns(5, 2), 2);
    }
}
