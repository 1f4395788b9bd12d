//! Numbers of a workload file as TOML reads them, for validation to refuse with the range it
//! expects. A leaf, so config and sale both use it.

use serde::Deserialize;

/// A count as the TOML reads it: an integer, or a float (`stock = 1e23`) that validation
/// refuses with the range it expects instead of the parser's `invalid type … expected i64`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum RawInt {
    Int(i64),
    Float(f64),
}

impl From<i64> for RawInt {
    fn from(v: i64) -> Self {
        Self::Int(v)
    }
}

impl<'de> Deserialize<'de> for RawInt {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl serde::de::Visitor<'_> for Visitor {
            type Value = RawInt;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an integer")
            }
            fn visit_i64<E>(self, v: i64) -> Result<RawInt, E> {
                Ok(RawInt::Int(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<RawInt, E> {
                Ok(i64::try_from(v).map_or(RawInt::Float(v as f64), RawInt::Int))
            }
            fn visit_f64<E>(self, v: f64) -> Result<RawInt, E> {
                Ok(RawInt::Float(v))
            }
        }
        d.deserialize_any(Visitor)
    }
}

/// A number as a workload would write it: very large or small ones as `1e12`, not 13 digits.
pub(super) fn number(v: f64) -> String {
    if v != 0.0 && v.is_finite() && !(1e-4..1e9).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        v.to_string()
    }
}
