//! One table of names per fieldless enum: the names written in files, shown in reports and
//! sent between processes all come from it, so they cannot drift apart.

/// Gives a fieldless enum its names: `ALL`, `NAMES`, `name()`, `Display`, `FromStr`, and serde
/// through the same names (an unknown name fails as serde's derive would: "unknown variant
/// `x`, expected one of ...").
///
/// ```ignore
/// enum_names!(Colour { Red = "red", DarkBlue = "dark-blue" });
/// ```
macro_rules! enum_names {
    ($ty:ident { $($variant:ident = $name:literal),+ $(,)? }) => {
        impl $ty {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$ty] = &[$($ty::$variant),+];

            /// The name of every variant, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($name),+];

            /// The name in files, reports and messages.
            pub fn name(self) -> &'static str {
                match self {
                    $($ty::$variant => $name),+
                }
            }
        }

        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }

        impl std::str::FromStr for $ty {
            type Err = $crate::names::UnknownName;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($name => Ok($ty::$variant),)+
                    _ => Err($crate::names::UnknownName {
                        name: s.to_string(),
                        expected: Self::NAMES,
                    }),
                }
            }
        }

        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.name())
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse()
                    .map_err(|_| serde::de::Error::unknown_variant(&s, Self::NAMES))
            }
        }
    };
}

pub(crate) use enum_names;

/// A name that is not in an enum's table.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{name:?}: expected {}", one_of(expected))]
pub struct UnknownName {
    /// What was given.
    pub name: String,
    /// Every name the enum has.
    pub expected: &'static [&'static str],
}

/// `one of "a", "b", "c"`.
pub fn one_of(names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("{n:?}")).collect();
    format!("one of {}", quoted.join(", "))
}

#[cfg(test)]
mod tests {
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Colour {
        Red,
        DarkBlue,
    }
    enum_names!(Colour {
        Red = "red",
        DarkBlue = "dark-blue",
    });

    #[test]
    fn display_from_str_and_serde_share_one_table() {
        for &c in Colour::ALL {
            assert_eq!(c.to_string().parse::<Colour>().unwrap(), c);
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{c}\""));
            assert_eq!(serde_json::from_str::<Colour>(&json).unwrap(), c);
        }
        let e = "green".parse::<Colour>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "\"green\": expected one of \"red\", \"dark-blue\""
        );
        let e = serde_json::from_str::<Colour>("\"green\"").unwrap_err();
        assert!(
            e.to_string()
                .starts_with("unknown variant `green`, expected `red` or `dark-blue`"),
            "{e}"
        );
    }
}
