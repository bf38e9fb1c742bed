//! The distribution functions the tests and intervals need: the standard normal CDF,
//! survival function and quantile (for the rank tests' normal approximations and the trend
//! test), and Student's t CDF and quantile for whole-number degrees of freedom (for the
//! paired intervals, whose degrees of freedom are blocks − 1).
//!
//! Written here rather than taken from a crate: see the note at the top of `lib.rs`.
//! Accuracy (checked against SciPy in the tests): the normal functions to ~1e-14 relative,
//! including far tails; the t quantile to ~1e-12 relative.

use std::f64::consts::{FRAC_2_SQRT_PI, PI, SQRT_2};

/// The complementary error function erfc(x) = 1 − erf(x), accurate in relative terms for
/// large x (where 1 − erf(x) would cancel).
///
/// |x| < 0.75: the series erf(x) = (2/√π)·e^(−x²)·Σ 2ⁿx^(2n+1)/(1·3·…·(2n+1)) (all terms
/// positive, Abramowitz & Stegun 7.1.6); x ≥ 0.75: the continued fraction (A&S 7.1.14)
/// erfc(x) = (e^(−x²)/√π)·1/(x + (1/2)/(x + 1/(x + (3/2)/(x + …)))), by Lentz's method
/// (fewer than 350 terms for x ≥ 0.75).
pub fn erfc(x: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x < 0.0 {
        return 2.0 - erfc(-x);
    }
    if x < 0.75 {
        return 1.0 - erf_series(x); // erfc > 0.28 here: the subtraction loses < 2 bits
    }
    if x > 27.3 {
        return 0.0; // below the smallest subnormal
    }
    // g = x + a1/(x + a2/(x + …)), a_k = k/2; erfc = e^(−x²)/√π / g.
    const TINY: f64 = 1e-300;
    let mut f = x;
    let mut c = f;
    let mut d = 0.0;
    for k in 1..5000 {
        let a = k as f64 / 2.0;
        d = x + a * d;
        if d == 0.0 {
            d = TINY;
        }
        c = x + a / c;
        if c == 0.0 {
            c = TINY;
        }
        d = 1.0 / d;
        let delta = c * d;
        f *= delta;
        if (delta - 1.0).abs() < 1e-16 {
            break;
        }
    }
    (-x * x).exp() * (FRAC_2_SQRT_PI / 2.0) / f
}

fn erf_series(x: f64) -> f64 {
    let x2 = x * x;
    let mut term = x;
    let mut sum = x;
    let mut n = 0.0;
    while term > sum * 1e-17 {
        n += 1.0;
        term *= 2.0 * x2 / (2.0 * n + 1.0);
        sum += term;
    }
    FRAC_2_SQRT_PI * (-x2).exp() * sum
}

/// The standard normal CDF Φ(z); accurate in relative terms in the lower tail.
pub fn normal_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / SQRT_2)
}

/// The standard normal survival function 1 − Φ(z); accurate in relative terms in the upper
/// tail.
pub fn normal_sf(z: f64) -> f64 {
    0.5 * erfc(z / SQRT_2)
}

fn normal_pdf(z: f64) -> f64 {
    (-0.5 * z * z).exp() / (2.0 * PI).sqrt()
}

/// The standard normal quantile Φ⁻¹(p): NaN outside [0, 1], ∓∞ at 0 and 1.
///
/// Starts from Abramowitz & Stegun 26.2.23 (error < 4.5e-4) and polishes with Newton steps
/// on `normal_cdf` (or `normal_sf` for the upper half, to keep relative accuracy).
pub fn normal_quantile(p: f64) -> f64 {
    if p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    if p > 0.5 {
        // Solve for the upper tail q = 1 − p by symmetry.
        return -lower_normal_quantile(1.0 - p);
    }
    lower_normal_quantile(p)
}

/// Φ⁻¹(p) for 0 < p ≤ 0.5.
fn lower_normal_quantile(p: f64) -> f64 {
    let t = (-2.0 * p.ln()).sqrt();
    let mut x = -(t
        - (2.515_517 + 0.802_853 * t + 0.010_328 * t * t)
            / (1.0 + 1.432_788 * t + 0.189_269 * t * t + 0.001_308 * t * t * t));
    for _ in 0..20 {
        let dx = (normal_cdf(x) - p) / normal_pdf(x);
        if !dx.is_finite() {
            break;
        }
        x -= dx;
        if dx.abs() <= 1e-15 * x.abs().max(1.0) {
            break;
        }
    }
    x
}

/// Student's t CDF with `df` (≥ 1, whole) degrees of freedom; NaN when `df` is 0.
///
/// Exact finite series (Abramowitz & Stegun 26.7.3 for odd, 26.7.4 for even `df`), with
/// θ = atan(t/√df): the cost grows with `df` (df/2 terms). Absolute accuracy ~1e-15.
pub fn t_cdf(t: f64, df: usize) -> f64 {
    if df == 0 || t.is_nan() {
        return f64::NAN;
    }
    if t == f64::INFINITY {
        return 1.0;
    }
    if t == f64::NEG_INFINITY {
        return 0.0;
    }
    0.5 + 0.5 * t_two_sided_mass(t, df)
}

/// A(t|ν) = P(−t < T < t), signed like t.
fn t_two_sided_mass(t: f64, nu: usize) -> f64 {
    let v = nu as f64;
    let c2 = v / (v + t * t); // cos²θ
    let s = t / (v + t * t).sqrt(); // sinθ
    if nu % 2 == 1 {
        let theta = (t / v.sqrt()).atan();
        if nu == 1 {
            return 2.0 * theta / PI;
        }
        // θ + sinθ·cosθ·(1 + (2/3)cos²θ + (2·4)/(3·5)cos⁴θ + … up to cos^(ν−3)θ)
        let mut term = 1.0;
        let mut sum = 1.0;
        let mut k = 1;
        while 2 * k < nu - 1 {
            term *= c2 * (2 * k) as f64 / (2 * k + 1) as f64;
            sum += term;
            k += 1;
        }
        2.0 / PI * (theta + s * c2.sqrt() * sum)
    } else {
        // sinθ·(1 + (1/2)cos²θ + (1·3)/(2·4)cos⁴θ + … up to cos^(ν−2)θ)
        let mut term = 1.0;
        let mut sum = 1.0;
        let mut k = 1;
        while 2 * k < nu {
            term *= c2 * (2 * k - 1) as f64 / (2 * k) as f64;
            sum += term;
            k += 1;
        }
        s * sum
    }
}

/// Student's t quantile: the t with `t_cdf(t, df) = p`, for whole `df` ≥ 1. NaN when `df`
/// is 0 or `p` is outside [0, 1]; ∓∞ at 0 and 1.
///
/// Up to 2000 degrees of freedom: bisection on the exact CDF (to the last bit). Above:
/// the Cornish–Fisher expansion in 1/ν (Abramowitz & Stegun 26.7.5), whose error is below
/// 1e-15 there.
pub fn t_quantile(p: f64, df: usize) -> f64 {
    if df == 0 || p.is_nan() || !(0.0..=1.0).contains(&p) {
        return f64::NAN;
    }
    if p == 0.0 {
        return f64::NEG_INFINITY;
    }
    if p == 1.0 {
        return f64::INFINITY;
    }
    if p < 0.5 {
        return -t_quantile(1.0 - p, df);
    }
    if p == 0.5 {
        return 0.0;
    }
    if df > 2000 {
        let z = normal_quantile(p);
        let v = df as f64;
        let z2 = z * z;
        let g1 = (z2 + 1.0) * z / 4.0;
        let g2 = ((5.0 * z2 + 16.0) * z2 + 3.0) * z / 96.0;
        let g3 = (((3.0 * z2 + 19.0) * z2 + 17.0) * z2 - 15.0) * z / 384.0;
        let g4 = ((((79.0 * z2 + 776.0) * z2 + 1482.0) * z2 - 1920.0) * z2 - 945.0) * z / 92160.0;
        return z + g1 / v + g2 / (v * v) + g3 / (v * v * v) + g4 / (v * v * v * v);
    }
    // The bisection costs ~60 CDF evaluations of df/2 terms each, and the same few
    // quantiles (0.975, 0.9875 at the blocks so far) are asked for after every block of an
    // adaptive run and thousands of times by its simulations: remembered per thread. The
    // cache only returns what the bisection returned, so results are bit-identical.
    T_QUANTILES.with(|cache| {
        let mut cache = cache.borrow_mut();
        let i = match cache.iter().position(|(bits, _)| *bits == p.to_bits()) {
            Some(i) => i,
            None => {
                if cache.len() >= 16 {
                    cache.clear();
                }
                cache.push((p.to_bits(), Vec::new()));
                cache.len() - 1
            }
        };
        let by_df = &mut cache[i].1;
        if by_df.len() <= df {
            by_df.resize(df + 1, f64::NAN);
        }
        if by_df[df].is_nan() {
            by_df[df] = t_quantile_bisection(p, df);
        }
        by_df[df]
    })
}

thread_local! {
    /// Per probability (its bits; at most 16 kept), the quantiles by degrees of freedom
    /// (NaN: not computed yet; at most 2001 entries).
    static T_QUANTILES: std::cell::RefCell<Vec<(u64, Vec<f64>)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

/// The t with A(t|df) = 2p − 1 for 0.5 < p < 1, by bisection on the exact CDF.
fn t_quantile_bisection(p: f64, df: usize) -> f64 {
    let target = 2.0 * p - 1.0; // A(t|ν) for t > 0
    let mut lo = 0.0f64;
    let mut hi = 1.0f64;
    while t_two_sided_mass(hi, df) < target {
        lo = hi;
        hi *= 2.0;
        if !hi.is_finite() {
            return f64::INFINITY;
        }
    }
    loop {
        let mid = 0.5 * (lo + hi);
        if mid <= lo || mid >= hi {
            return mid;
        }
        if t_two_sided_mass(mid, df) < target {
            lo = mid;
        } else {
            hi = mid;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The per-thread memory of t quantiles returns exactly what the bisection computes,
    /// for more probabilities than it keeps (so entries are dropped and recomputed) and
    /// in an order that revisits them.
    #[test]
    fn remembered_quantiles_are_the_bisections() {
        for round in 0..2 {
            for i in 0..40 {
                let p = 0.5001 + 0.0123 * f64::from(i);
                for df in [1, 2, 5, 37, 2000] {
                    let want = t_quantile_bisection(p, df).to_bits();
                    assert_eq!(t_quantile(p, df).to_bits(), want, "{round} {p} {df}");
                    assert_eq!(t_quantile(p, df).to_bits(), want, "{round} {p} {df}");
                    assert_eq!(t_quantile(1.0 - p, df), -f64::from_bits(want));
                }
            }
        }
    }

    fn close(got: f64, want: f64, rel: f64) -> bool {
        (got - want).abs() <= rel * want.abs().max(f64::MIN_POSITIVE)
    }

    #[test]
    fn erfc_matches_scipy() {
        // scipy.special.erfc (SciPy 1.17.1), printed with repr().
        let cases = [
            (0.0, 1.0),
            (0.1, 0.8875370839817152),
            (0.3, 0.6713732405408726),
            (0.5, 0.4795001221869535),
            (0.75, 0.2888443663464849),
            (1.0, 0.15729920705028516),
            (1.5, 0.03389485352468927),
            (1.9, 0.007209570764742531),
            (2.0, 0.004677734981047266),
            (2.5, 0.00040695201744495886),
            (4.0, 1.541725790028002e-08),
            (10.0, 2.0884875837625446e-45),
            (26.0, 5.663192408856145e-296),
            (-1.0, 1.8427007929497148),
        ];
        for (x, want) in cases {
            assert!(
                close(erfc(x), want, 2e-14),
                "erfc({x}) = {:e}, want {want:e}",
                erfc(x)
            );
        }
    }

    #[test]
    fn normal_matches_scipy() {
        // scipy.stats.norm.cdf / norm.sf / norm.ppf (SciPy 1.17.1).
        assert!(close(normal_cdf(1.959963984540054), 0.975, 1e-15));
        assert!(close(normal_cdf(-1.0), 0.15865525393145707, 1e-14));
        assert!(close(normal_cdf(-8.0), 6.22096057427174e-16, 1e-13));
        assert!(close(normal_sf(5.0), 2.866515718791933e-07, 1e-13));
        assert!(close(normal_sf(-0.3), 0.6179114221889526, 1e-14));
        assert_eq!(normal_cdf(0.0), 0.5);
        for (p, want) in [
            (0.975, 1.959963984540054),
            (0.5, 0.0),
            (0.025, -1.9599639845400545),
            (0.995, 2.5758293035489004),
            (0.8, 0.8416212335729143),
            (1e-10, -6.361340902404056),
            (0.3, -0.5244005127080409),
        ] {
            let got = normal_quantile(p);
            assert!(
                (got - want).abs() <= 1e-13 * want.abs().max(1.0),
                "ppf({p}) = {got}, want {want}"
            );
        }
        assert_eq!(normal_quantile(0.0), f64::NEG_INFINITY);
        assert!(normal_quantile(1.5).is_nan());
    }

    #[test]
    fn t_matches_scipy() {
        // scipy.stats.t.ppf(p, df) (SciPy 1.17.1); the classic table values 12.706 (df 1),
        // 4.303 (df 2), 2.262 (df 9), 2.045 (df 29) for p = 0.975 are the same numbers.
        let cases = [
            (0.975, 1, 12.706204736174694),
            (0.975, 2, 4.302652729749462),
            (0.975, 3, 3.1824463052837078),
            (0.975, 4, 2.7764451051977934),
            (0.975, 9, 2.262157162798205),
            (0.975, 29, 2.045229642132703),
            (0.995, 9, 3.249835541592126),
            (0.95, 19, 1.7291328115213682),
            (0.9, 5, 1.4758840488244815),
            (0.975, 100, 1.9839715185235518),
            (0.975, 1000, 1.9623390808264083),
            (0.975, 2000, 1.9611508260994377),
            (0.975, 2001, 1.9611502326224413),
            (0.975, 100000, 1.9599877075346095),
            (0.025, 9, -2.2621571627982053),
        ];
        for (p, df, want) in cases {
            let got = t_quantile(p, df);
            assert!(
                close(got, want, 1e-12),
                "t_quantile({p}, {df}) = {got}, want {want}"
            );
        }
        // scipy.stats.t.cdf(t, df)
        assert!(close(t_cdf(2.0, 1), 0.8524163823495667, 1e-14));
        assert!(close(t_cdf(2.0, 2), 0.908248290463863, 1e-14));
        assert!(close(t_cdf(-1.5, 7), 0.088649243494985, 1e-13));
        assert!(close(t_cdf(0.7, 30), 0.7553397782501642, 1e-14));
        assert_eq!(t_quantile(0.5, 4), 0.0);
        assert!(t_quantile(0.5, 0).is_nan());
        assert_eq!(t_quantile(1.0, 4), f64::INFINITY);
    }
}
