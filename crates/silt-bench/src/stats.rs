//! The statistics and formatting helpers every part of silt-bench shares: medians, the
//! latency histogram, splitting work over workers, comma-separated flag lists, and the cell
//! for a missing figure. One copy each, so the commit matrix, the engine runs and the report
//! agree on what a median or a missing value is.

use std::str::FromStr;

use hdrhistogram::Histogram;

/// How a table cell shows a figure that was not measured.
pub const MISSING: &str = "—";

/// The median of the finite values, `None` without any (an even count averages the middle
/// two).
pub fn median(values: impl IntoIterator<Item = f64>) -> Option<f64> {
    let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    Some(if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    })
}

/// [`median`] of the values that were measured.
pub fn median_of(values: impl IntoIterator<Item = Option<f64>>) -> Option<f64> {
    median(values.into_iter().flatten())
}

/// `f(v)`, or [`MISSING`].
pub fn fmt_opt(v: Option<f64>, f: impl Fn(f64) -> String) -> String {
    v.map_or_else(|| MISSING.to_string(), f)
}

/// A latency histogram in nanoseconds: 1 ns to 10 minutes, 3 significant figures.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000_000, 3).expect("valid bounds")
}

/// `total` operations split over `workers`: the first `total % workers` do one more, so the
/// parts add up to exactly `total`.
pub fn split(total: u64, workers: usize) -> Vec<u64> {
    let n = workers as u64;
    (0..n)
        .map(|i| total / n + u64::from(i < total % n))
        .collect()
}

/// The non-empty, trimmed items of a comma-separated flag value.
pub fn names(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|x| !x.is_empty())
        .map(String::from)
        .collect()
}

/// [`names`], each parsed; the error names the flag `--{what}` and the bad item.
pub fn list_of<T: FromStr>(s: &str, what: &str) -> Result<Vec<T>, String> {
    names(s)
        .into_iter()
        .map(|x| {
            x.parse()
                .map_err(|_| format!("--{what}: cannot parse {x:?}"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts_and_of_nothing() {
        assert_eq!(median([3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median([4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median([f64::NAN, 1.0]), Some(1.0));
        assert_eq!(median([]), None);
        assert_eq!(
            median_of([Some(3.0), None, Some(1.0), Some(2.0)]),
            Some(2.0)
        );
        assert_eq!(median_of([None]), None);
    }

    #[test]
    fn split_adds_up() {
        assert_eq!(split(200, 3), vec![67, 67, 66]);
        assert_eq!(split(1000, 1000).iter().sum::<u64>(), 1000);
        assert_eq!(split(2, 4), vec![1, 1, 0, 0]);
    }

    #[test]
    fn lists() {
        assert_eq!(names(" a, ,b,"), vec!["a", "b"]);
        assert_eq!(list_of::<u32>("1,2", "n"), Ok(vec![1, 2]));
        assert_eq!(
            list_of::<u32>("1,x", "threads"),
            Err("--threads: cannot parse \"x\"".to_string())
        );
        assert_eq!(fmt_opt(None, |x| x.to_string()), MISSING);
    }
}
