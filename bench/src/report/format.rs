//! How the report's numbers read: rates, durations, shares, p-values and the sample count a
//! percentile carries. Every renderer (the printed tables, report.html, the charts, the gate,
//! the needs reasons) formats through here, so a figure has one spelling per use. Where two
//! uses spell one quantity differently on purpose (a table cell, a chart axis, a command
//! line), each has its own function here and says where it is used.

use crate::record::quantile::min_samples;
use crate::record::{LatencySummary, Pct};

/// `x` with at most `places` decimals, trailing zeros (and a trailing point) dropped:
/// `decimals(665.6999, 2)` is `665.7`, `decimals(1600.0, 0)` is `1600`.
pub fn decimals(x: f64, places: usize) -> String {
    let s = format!("{x:.places$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// `x` rounded to `places` decimals, as the saved files hold it (summary.json, sweep.json).
pub fn round(x: f64, places: i32) -> f64 {
    let scale = 10f64.powi(places);
    (x * scale).round() / scale
}

/// Server work per grant or sale (commands, bytes): two decimals at most, `-` when missing.
pub fn work_per(v: Option<f64>) -> String {
    or_dash(v, |v| decimals(v, 2))
}

/// A network fault's probe in one cell: the median round trip before / during / after, ms,
/// and the spread of the samples during it (`0.21 / 101.4 (n=10, 82.1–119.6) / 0.2`).
pub fn probe_rtt(p: &crate::chaos::network::LinkProbe) -> String {
    let med = |s: &crate::cluster::netem::ProbeSamples| or_dash(s.median_ms, |m| format!("{m}"));
    let d = &p.during;
    let lo = d.rtt_ms.iter().copied().reduce(f64::min);
    let hi = d.rtt_ms.iter().copied().reduce(f64::max);
    let failed = match d.failed {
        0 => String::new(),
        k => format!(", {k} failed"),
    };
    let spread = match lo.zip(hi) {
        Some((lo, hi)) => format!(" (n={}, {lo}–{hi}{failed})", d.rtt_ms.len()),
        None => format!(" (n=0{failed})"),
    };
    format!(
        "{} / {}{spread} / {}",
        med(&p.before),
        med(d),
        med(&p.after)
    )
}

/// `-` for a figure that is missing, else `f` of it.
pub fn or_dash<T>(v: Option<T>, f: impl FnOnce(T) -> String) -> String {
    v.map_or_else(|| "-".into(), f)
}

/// A rate on a page: at most two decimals, trailing zeros dropped (`640`, `1.56`, `665.7`). A
/// share of a capacity carries float noise (`665.6999999999999` in the workload); a cell's
/// `data-value` keeps the saved value.
pub fn rate(per_s: f64) -> String {
    decimals(per_s, 2)
}

/// A run's rate in a table cell, to a tenth: `2159.4` (attempts/s, sales/s, reads/s; the
/// printed tables and report.html's headline table alike).
pub fn rate_cell(per_s: f64) -> String {
    format!("{per_s:.1}")
}

/// A rate exactly as saved (`400`, `283`, `12.5`): a sweep's folder names, the printed
/// capacity table, a command line that must ask for the same rate.
pub fn rate_exact(r: f64) -> String {
    if r.fract() == 0.0 {
        format!("{r:.0}")
    } else {
        format!("{r}")
    }
}

/// A rate on a chart's axis or tick: `80`, `1.2k`, `15k`.
pub fn rate_axis(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 1000.0 {
        format!("{}k", decimals(v / 1000.0, 1))
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else {
        decimals(v, 1)
    }
}

/// `x` to three significant digits, rounded by `round` (round: nearest, floor: down, ceil:
/// up): the search's rates and the ends the drift widens.
pub fn three_digits(x: f64, round: fn(f64) -> f64) -> f64 {
    if x <= 0.0 {
        return x;
    }
    // Scaled by an exact power of ten and divided back, so that 35.3 reads `35.3`, not
    // `35.300000000000004` (353 × 0.1).
    let places = 2 - x.log10().floor() as i32;
    let scale = 10f64.powi(places.abs());
    let on_grid = |y: f64| round((y * 1e9).round() / 1e9);
    if places >= 0 {
        on_grid(x * scale) / scale
    } else {
        on_grid(x / scale) * scale
    }
}

/// A rate in a chart's value label, to three significant digits: `1600`, `17.7`, `1.56`.
pub fn rate_label(v: f64) -> String {
    let places = if v >= 100.0 {
        0
    } else if v >= 10.0 {
        1
    } else {
        2
    };
    decimals(v, places)
}

/// µs as ms with three decimals, exact (every µs value has one such spelling): report.html
/// and the plain-words lines.
pub fn ms_exact(us: u64) -> String {
    format!("{}.{:03}", us / 1000, us % 1000)
}

/// µs as ms for the printed tables: two decimals, none from 100 ms up.
pub fn ms_table(us: u64) -> String {
    if us >= 100_000 {
        format!("{:.0}", us as f64 / 1000.0)
    } else {
        format!("{:.2}", us as f64 / 1000.0)
    }
}

/// Milliseconds on a chart's axis: no trailing zeros, enough digits for sub-ms values.
pub fn ms_axis(v: f64) -> String {
    let places = if v >= 100.0 {
        0
    } else if v >= 1.0 {
        1
    } else {
        3
    };
    decimals(v, places)
}

/// Seconds to the millisecond, as saved: `2.100` (report.html, the plain-words lines).
pub fn secs(s: f64) -> String {
    format!("{s:.3}")
}

/// Seconds to the hundredth: `2.10` (the printed tables).
pub fn secs_table(s: f64) -> String {
    format!("{s:.2}")
}

/// Seconds on a chart's axis: whole seconds without a decimal.
pub fn secs_axis(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// A fraction as a whole percent, never rounded up to 100 % unless it is whole: `99.9%`,
/// `42%` (the share of arrivals started).
pub fn percent(f: f64) -> String {
    let p = f * 100.0;
    if p < 100.0 && p > 99.0 {
        format!("{:.1}%", (p * 10.0).floor() / 10.0)
    } else {
        format!("{:.0}%", p.floor())
    }
}

/// A fraction as the nearest whole percent: `70%` (a share of a capacity, a tolerance).
pub fn percent_round(f: f64) -> String {
    format!("{:.0}%", f * 100.0)
}

/// A fraction as a percent to one decimal, trailing zeros dropped: `4%`, `2.5%` (a sweep
/// step's miss shares).
pub fn percent_tenths(f: f64) -> String {
    format!("{}%", decimals((f * 1000.0).round() / 10.0, 3))
}

/// The change from `from` to `to` in percent, signed: `+12.5%`; `n/a` from 0.
pub fn percent_change(from: f64, to: f64) -> String {
    if from == 0.0 {
        return "n/a".into();
    }
    format!("{:+.1}%", (to - from) / from * 100.0)
}

/// An upper over a lower end: `1.25x`.
pub fn ratio(w: f64) -> String {
    format!("{w:.2}x")
}

/// A p or a level with two significant digits (0.05, 0.025, 0.0042).
pub fn p_value(p: f64) -> String {
    decimals(p, (-p.log10()).floor().max(0.0) as usize + 2)
}

/// A run's danger window as figures (the printed table's note): `n=2, loss → notice p50
/// 2.134 s, max 2.400 s; 2 writes after the loss, longest 2.140 s past it, 2 refused by a
/// fence; loss moment: lease-arithmetic`.
pub fn danger_window(d: &crate::record::DangerWindow) -> String {
    let s_of = |us: Option<u64>| or_dash(us, |u| format!("{} s", secs(u as f64 / 1e6)));
    let mut out = format!(
        "n={}, loss → notice p50 {}, max {}; {} writes after the loss, longest {} past it, {} \
         refused by a fence",
        d.n,
        s_of(d.loss_to_notice_p50_us),
        s_of(d.loss_to_notice_max_us),
        d.writes_after_loss,
        s_of(d.write_after_loss_max_us),
        d.refused_by_fence
    );
    if d.unnoticed + d.no_loss_moment > 0 {
        out += &format!(
            "; of {} lost, {} never noticed, {} without a loss moment",
            d.lost, d.unnoticed, d.no_loss_moment
        );
    }
    if let Some(us) = d.unnoticed_went_on_max_us {
        out += &format!(
            "; {} overlapped, never told, went on up to {} s after the next grant",
            d.unnoticed_overlapped,
            secs(us as f64 / 1e6)
        );
    }
    if let Some(source) = &d.source {
        out += &format!("; loss moment: {source}");
    }
    out
}

/// What a percentile is of: `n=1000`, or `max of 42` when the count cannot bound it (the
/// value shown is then the maximum; the rule: [`crate::record::quantile::supported`]).
pub fn samples(count: u64, supported: bool) -> String {
    if supported {
        format!("n={count}")
    } else {
        format!("max of {count}")
    }
}

/// A percentile cell, carrying its sample count: `3.21 (n=1000)`, or `12.50 (max of 42)` when
/// the count cannot bound the percentile; `-` without samples. `censored(q)`: whether the
/// value at quantile `q` (1 for the maximum) lies among arrivals never started, marked `+`.
/// `ms` formats µs ([`ms_exact`] or [`ms_table`]).
pub fn latency_cell(
    l: &LatencySummary,
    p: Pct,
    censored: impl Fn(f64) -> bool,
    ms: fn(u64) -> String,
) -> String {
    or_dash(latency_parts(l, p, censored, ms), |(v, n)| {
        format!("{v} ({n})")
    })
}

/// [`latency_cell`] in two parts, the value and what it is of (`n=1000`, `max of 42`);
/// `None` without samples.
pub fn latency_parts(
    l: &LatencySummary,
    p: Pct,
    censored: impl Fn(f64) -> bool,
    ms: fn(u64) -> String,
) -> Option<(String, String)> {
    if l.count == 0 {
        return None;
    }
    let supported = l.supports(p);
    let plus = if censored(if supported { p.q() } else { 1.0 }) {
        "+"
    } else {
        ""
    };
    Some((
        format!("{}{plus}", ms(l.shown(p))),
        samples(l.count, supported),
    ))
}

/// What `(max of N)` in a percentile cell means.
pub fn too_few_note() -> String {
    format!(
        "(max of N): N samples cannot bound that percentile at 95 % (a p50 needs {}, a p99 {}, \
         a p99.9 {}), so the cell shows their maximum instead",
        min_samples(Pct::P50.q()),
        min_samples(Pct::P99.q()),
        min_samples(Pct::P999.q())
    )
}

/// A probe's p50 and p99 (µs) in one unit, the p99's: `p50 31 µs p99 80 µs`, `p50 0.91 ms p99
/// 3.1 ms` (ms from a 1 ms p99 up).
pub fn probe_pair(p50_us: f64, p99_us: f64) -> String {
    let (unit, v): (&str, fn(f64) -> String) = if p99_us >= 1_000.0 {
        ("ms", |us| decimals(us / 1_000.0, 2))
    } else {
        ("µs", |us| decimals(us, 1))
    };
    format!("p50 {} {unit} p99 {} {unit}", v(p50_us), v(p99_us))
}

/// The machine a command ran on, in one line (the printed tables' first line, report.html's
/// top): `machine: AMD EPYC 7B13, 2 cores, cpu score 412 M/s, fdatasync p50 0.9 ms p99 3.1 ms
/// (n=800, ext4), loopback p50 31 µs p99 80 µs (n=5000), psi cpu 3% io 0%`.
pub fn machine(m: &crate::record::machine::Machine) -> String {
    let cores = if m.usable_cores > 0 && m.usable_cores != m.cores {
        format!("{} cores ({} usable)", m.cores, m.usable_cores)
    } else {
        format!("{} cores", m.cores)
    };
    let mut parts = vec![m.cpu_model.clone(), cores];
    parts.push(m.cpu_score.as_ref().map_or_else(
        || "cpu score not measured".into(),
        |c| {
            let debug = if c.optimized { "" } else { " (debug build)" };
            format!("cpu score {} M/s{debug}", decimals(c.m_per_s, 0))
        },
    ));
    let p = |l: &crate::record::machine::Latency| probe_pair(l.p50_us, l.p99_us);
    parts.push(m.fdatasync.as_ref().map_or_else(
        || "fdatasync not measured".into(),
        |d| {
            let fs =
                d.fs.as_deref()
                    .map(|f| format!(", {f}"))
                    .unwrap_or_default();
            format!("fdatasync {} (n={}{fs})", p(&d.latency), d.latency.n)
        },
    ));
    parts.push(m.loopback.as_ref().map_or_else(
        || "loopback not measured".into(),
        |l| format!("loopback {} (n={})", p(l), l.n),
    ));
    parts.push(m.psi.as_ref().map_or_else(
        || "psi not measured".into(),
        |s| {
            let io = s.io_pct.map(|v| format!(" io {}%", decimals(v, 0)));
            format!(
                "psi cpu {}%{}",
                decimals(s.cpu_pct, 0),
                io.unwrap_or_default()
            )
        },
    ));
    format!("machine: {}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_machine_reads_as_one_line_and_says_what_it_did_not_measure() {
        use crate::record::machine::{CpuScore, DiskSync, Latency, Machine, Psi};
        let lat = |n, p50_us, p99_us| Latency {
            n,
            p50_us,
            p99_us,
            max_us: p99_us,
        };
        let mut m = Machine {
            cpu_model: "AMD EPYC 7B13".into(),
            cores: 2,
            usable_cores: 2,
            cpu_score: Some(CpuScore {
                m_per_s: 412.26,
                rounds: 16,
                optimized: true,
            }),
            fdatasync: Some(DiskSync {
                path: "/tmp".into(),
                fs: Some("ext4".into()),
                write_bytes: 2300,
                latency: lat(800, 912.0, 3_100.0),
            }),
            loopback: Some(lat(5000, 31.0, 80.4)),
            psi: Some(Psi {
                cpu_pct: 3.2,
                io_pct: Some(0.0),
                memory_pct: None,
            }),
            unmeasured: Vec::new(),
            probe_s: 2.6,
        };
        assert_eq!(
            machine(&m),
            "machine: AMD EPYC 7B13, 2 cores, cpu score 412 M/s, fdatasync p50 0.91 ms p99 3.1 ms \
             (n=800, ext4), loopback p50 31 µs p99 80.4 µs (n=5000), psi cpu 3% io 0%"
        );
        (m.fdatasync, m.psi, m.usable_cores) = (None, None, 1);
        m.cpu_score.as_mut().unwrap().optimized = false;
        let line = machine(&m);
        assert!(
            line.contains("2 cores (1 usable)")
                && line.contains("M/s (debug build)")
                && line.contains("fdatasync not measured")
                && line.ends_with("psi not measured"),
            "{line}"
        );
    }

    #[test]
    fn a_probe_reads_as_medians_and_the_spread_during_the_fault() {
        use crate::chaos::network::LinkProbe;
        use crate::cluster::netem::ProbeSamples;
        let samples = |rtt_ms: Vec<f64>, failed| {
            let mut s = ProbeSamples {
                rtt_ms,
                failed,
                median_ms: None,
            };
            s.median_ms = s.median();
            s
        };
        let p = LinkProbe {
            path: "worker-2 → redis-3".into(),
            before: samples(vec![0.1, 0.2, 0.1], 0),
            during: samples(vec![101.5, 82.0, 119.25], 1),
            after: samples(vec![0.12], 0),
            ..LinkProbe::default()
        };
        assert_eq!(
            probe_rtt(&p),
            "0.1 / 101.5 (n=3, 82–119.25, 1 failed) / 0.12"
        );
        // A reset: every connect during it failed.
        let reset = LinkProbe {
            during: samples(vec![], 10),
            ..p
        };
        assert_eq!(probe_rtt(&reset), "0.1 / - (n=0, 10 failed) / 0.12");
    }

    #[test]
    fn ms_is_exact() {
        assert_eq!(ms_exact(0), "0.000");
        assert_eq!(ms_exact(7), "0.007");
        assert_eq!(ms_exact(12_345), "12.345");
        assert_eq!(ms_exact(4_000_000), "4000.000");
    }

    #[test]
    fn table_ms_drops_decimals_from_100_ms() {
        assert_eq!(ms_table(3_210), "3.21");
        assert_eq!(ms_table(99_994), "99.99");
        assert_eq!(ms_table(123_456), "123");
    }

    #[test]
    fn rates_read_without_float_noise() {
        assert_eq!(rate(665.699_999_999_999_9), "665.7");
        assert_eq!(rate(1.56), "1.56");
        assert_eq!(rate(640.0), "640");
        assert_eq!(rate(12.39), "12.39");
        assert_eq!(rate(0.0), "0");
        assert_eq!(rate_exact(283.0), "283");
        assert_eq!(rate_exact(12.3), "12.3");
    }

    #[test]
    fn chart_rates_are_short() {
        assert_eq!(rate_axis(50.0), "50");
        assert_eq!(rate_axis(1000.0), "1k");
        assert_eq!(rate_axis(1500.0), "1.5k");
        assert_eq!(rate_axis(20000.0), "20k");
        assert_eq!(rate_axis(2.5), "2.5");
        assert_eq!(rate_axis(3.0), "3");
        assert_eq!(rate_label(1600.0), "1600");
        assert_eq!(rate_label(17.7), "17.7");
        assert_eq!(rate_label(1.56), "1.56");
        assert_eq!(rate_label(12.5), "12.5");
        assert_eq!(rate_label(20.0), "20");
        assert_eq!(ms_axis(250.0), "250");
        assert_eq!(ms_axis(10.0), "10");
        assert_eq!(ms_axis(2.5), "2.5");
        assert_eq!(ms_axis(0.125), "0.125");
        assert_eq!(ms_axis(0.5), "0.5");
    }

    #[test]
    fn shares_and_p_values() {
        assert_eq!(percent(0.999_9), "99.9%");
        assert_eq!(percent(1.0), "100%");
        assert_eq!(percent(0.426), "42%");
        assert_eq!(percent_round(0.7), "70%");
        assert_eq!(percent_tenths(0.04), "4%");
        assert_eq!(percent_tenths(0.0251), "2.5%");
        assert_eq!(percent_change(100.0, 112.5), "+12.5%");
        assert_eq!(percent_change(0.0, 1.0), "n/a");
        assert_eq!(p_value(0.05), "0.05");
        assert_eq!(p_value(0.0042), "0.0042");
        assert_eq!(p_value(0.025), "0.025");
    }

    #[test]
    fn a_percentile_carries_its_sample_count() {
        let mut l = LatencySummary {
            count: 1000,
            p99: 3_210,
            max: 9_000,
            ..Default::default()
        };
        assert_eq!(
            latency_cell(&l, Pct::P99, |_| false, ms_table),
            "3.21 (n=1000)"
        );
        l.count = 42;
        assert_eq!(
            latency_cell(&l, Pct::P99, |q| q == 1.0, ms_exact),
            "9.000+ (max of 42)"
        );
        l.count = 0;
        assert_eq!(latency_cell(&l, Pct::P99, |_| false, ms_exact), "-");
    }
}
