//! A span of values written `"a..b"` (or `"a..=b"`, both ends included) or as one value: the
//! units an order asks for, the delay before a buyer pays. A leaf, so sale and pay both use it.

use std::fmt::{Display, Formatter, Result as FmtResult};

/// `(min, max)` from `"a..b"`, `"a..=b"` or `"a"`, each end read by `one`; `Err` when an end does
/// not read or `min > max`.
pub(super) fn parse<T: PartialOrd>(s: &str, one: impl Fn(&str) -> Option<T>) -> Result<(T, T), ()> {
    let (min, max) = match s.split_once("..") {
        Some((a, b)) => (one(a.trim()), one(b.trim_start_matches('=').trim())),
        None => (one(s.trim()), one(s.trim())),
    };
    match (min, max) {
        (Some(min), Some(max)) if min <= max => Ok((min, max)),
        _ => Err(()),
    }
}

/// `"min..max"`, or one value when both ends are the same, each shown by `show`.
pub(super) fn write<T: PartialEq, D: Display>(
    f: &mut Formatter<'_>,
    (min, max): (T, T),
    show: impl Fn(T) -> D,
) -> FmtResult {
    if min == max {
        write!(f, "{}", show(min))
    } else {
        write!(f, "{}..{}", show(min), show(max))
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn both_ends_one_value_and_bad_spans() {
        let n = |t: &str| t.parse::<u32>().ok();
        assert_eq!(parse("1..3", n), Ok((1, 3)));
        assert_eq!(parse(" 1 ..= 3 ", n), Ok((1, 3)));
        assert_eq!(parse("2", n), Ok((2, 2)));
        for bad in ["3..1", "1..", "..2", "x", ""] {
            assert_eq!(parse(bad, n), Err(()), "{bad}");
        }
    }
}
