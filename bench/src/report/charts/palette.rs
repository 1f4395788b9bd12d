//! Which panel a strategy is drawn in (its family) and how it is inked there: colours are
//! distinct within a panel, so a chart of thirty strategies never asks the eye to tell twenty
//! hues apart.

use plotters::style::RGBColor;

use crate::strategy::{self, Family};

/// Eight well-separated colours (Tableau 10 without its red, which marks unsafe results and
/// the SLO, and its grey, which is the fault bands and the other families' points).
const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// How one strategy is drawn inside its panel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ink {
    /// Its colour.
    pub color: RGBColor,
    /// Members past the eighth of a panel repeat a colour: dashed lines and open markers
    /// tell them apart.
    pub dashed: bool,
    /// The marker shape on its line: where lines coincide, their markers still show.
    pub shape: Shape,
}

/// A marker shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A disc.
    Circle,
    /// A square.
    Square,
    /// A triangle, point up.
    Triangle,
    /// A diamond.
    Diamond,
}

impl Ink {
    /// The ink of the `i`-th member of a panel.
    pub fn nth(i: usize) -> Ink {
        const SHAPES: [Shape; 4] = [
            Shape::Circle,
            Shape::Square,
            Shape::Triangle,
            Shape::Diamond,
        ];
        let round = i / COLORS.len();
        Ink {
            color: COLORS[i % COLORS.len()],
            dashed: round % 2 == 1,
            // Shifted each round of colours, so a repeated colour also changes shape.
            shape: SHAPES[(i + round) % SHAPES.len()],
        }
    }
}

/// The panel a strategy is drawn in: its family, or `Other` for an id this lockbench does not
/// know and cannot place (an old result).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    /// A known family.
    Family(Family),
    /// Neither registered nor recognisable.
    Other,
}

impl Group {
    /// The group of `id`: the registry's family; for an id it does not know, a control when the
    /// result says it claims no safety, a library by its `lib:` prefix, else `Other`.
    pub fn of(id: &str, claims_safety: bool) -> Group {
        match strategy::find(id) {
            Ok(info) => Group::Family(info.family()),
            Err(_) if !claims_safety => Group::Family(Family::Controls),
            Err(_) if id.starts_with("lib:") => Group::Family(Family::Libraries),
            Err(_) => Group::Other,
        }
    }

    /// The panel's heading.
    pub fn title(self) -> &'static str {
        match self {
            Group::Family(f) => f.title(),
            Group::Other => "other",
        }
    }

    /// Where the panel goes: families in report order, unplaced ids before the controls, so
    /// the controls stay last and apart.
    fn rank(self) -> usize {
        match self {
            Group::Family(Family::Controls) => Family::ALL.len() + 1,
            Group::Family(f) => Family::ALL.iter().position(|&g| g == f).unwrap_or(0),
            Group::Other => Family::ALL.len(),
        }
    }

    /// Whether the panel holds the known-unsafe controls.
    pub fn is_controls(self) -> bool {
        self == Group::Family(Family::Controls)
    }
}

/// The members of one panel: indices into the caller's list, in its order, each with its ink.
#[derive(Debug, Clone)]
pub struct Panel {
    /// The family.
    pub group: Group,
    /// `(index, ink)` of each member.
    pub members: Vec<(usize, Ink)>,
}

/// Groups `groups[i]` (the group of item `i`) into panels in report order, members in the
/// caller's order; only groups present get a panel.
pub fn panels(groups: &[Group]) -> Vec<Panel> {
    let mut present: Vec<Group> = Vec::new();
    for &g in groups {
        if !present.contains(&g) {
            present.push(g);
        }
    }
    present.sort_by_key(|g| g.rank());
    present
        .into_iter()
        .map(|group| Panel {
            group,
            members: groups
                .iter()
                .enumerate()
                .filter(|&(_, &g)| g == group)
                .enumerate()
                .map(|(n, (i, _))| (i, Ink::nth(n)))
                .collect(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_ids_take_their_family_and_unknown_ones_never_panic() {
        // (id, whether its result claims safety, the family it falls in)
        let cases = [
            ("mysql-atomic", true, Family::Database),
            ("redlock", true, Family::RedisMulti),
            ("none", false, Family::Controls),
            ("lib:curator", true, Family::Libraries),
            ("lib:gone-since", true, Family::Libraries),
            ("retired-x", false, Family::Controls),
        ];
        for (id, claims_safety, family) in cases {
            assert_eq!(Group::of(id, claims_safety), Group::Family(family), "{id}");
        }
        assert_eq!(Group::of("retired-y", true), Group::Other);
    }

    #[test]
    fn panels_follow_report_order_with_controls_last_and_inks_distinct_within() {
        let ids = [
            ("none", false),
            ("redis-setnx", true),
            ("mysql-atomic", true),
            ("retired", true),
            ("redis-setnx-fenced", true),
        ];
        let groups: Vec<Group> = ids.iter().map(|&(id, c)| Group::of(id, c)).collect();
        let p = panels(&groups);
        let order: Vec<&str> = p.iter().map(|p| p.group.title()).collect();
        assert_eq!(
            order,
            ["database", "Redis, single node", "other", "controls"]
        );
        assert_eq!(p[1].members.iter().map(|m| m.0).collect::<Vec<_>>(), [1, 4]);
        assert_ne!(p[1].members[0].1, p[1].members[1].1);
    }

    #[test]
    fn sixteen_members_of_one_panel_are_all_told_apart() {
        let inks: Vec<Ink> = (0..16).map(Ink::nth).collect();
        for (a, x) in inks.iter().enumerate() {
            for y in &inks[a + 1..] {
                assert_ne!(x, y);
                if x.color == y.color {
                    assert!(x.dashed != y.dashed && x.shape != y.shape, "{x:?} {y:?}");
                }
            }
        }
    }
}
