// Python's number formats ("{:.1f}", "{:,.0f}", "{:.3g}", "{:.1%}") in the browser, digit for digit: the CLI's text
// (render/text.py, cli/train_cmd.py render_duration, units.py) is written with them, and the pages say the same
// numbers in the same words. Python rounds the exact binary value half to even; JS toFixed rounds a tie up, so the
// rounding is done here on the exact decimal expansion (toFixed(100) is exact for |x| < 1e21).
// tests/web/test_pyformat_js.py compares each with Python on random and edge values.

/** The exact decimal digits of |x| rounded half to even at `places` decimals: [integer part, fraction part]. */
function roundExact(x, places) {
  const full = Math.abs(x).toFixed(100);
  const [intPart, frac] = full.split(".");
  const kept = BigInt(intPart + frac.slice(0, places));
  const rest = frac.slice(places);
  const half = "5".padEnd(rest.length, "0");
  const last = kept % 10n;
  const up = rest > half || (rest === half && last % 2n === 1n);
  const digits = (up ? kept + 1n : kept).toString().padStart(places + 1, "0");
  return [digits.slice(0, digits.length - places), digits.slice(digits.length - places)];
}

/** Python keeps the sign of a negative value that rounds to zero ("-0.0"). */
function sign(x, text) { return x < 0 || Object.is(x, -0) ? `-${text}` : text; }

/** Python f"{x:.{places}f}" ("{x:,.{places}f}" with grouped). */
export function pyFixed(x, places, grouped = false) {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? "nan" : (x > 0 ? "inf" : "-inf");
  // beyond toFixed's exact range a double is a whole number: its exact digits, zero decimals
  let [i, f] = Math.abs(x) >= 1e21 ? [BigInt(Math.abs(x)).toString(), "0".repeat(places)] : roundExact(x, places);
  if (grouped) i = i.replace(/\B(?=(\d{3})+(?!\d))/g, ",");
  return sign(x, places ? `${i}.${f}` : i);
}

/** Python f"{x:,.{places}f}". */
export function pyGrouped(x, places) { return pyFixed(x, places, true); }

/** Python f"{x:.{places}%}". */
export function pyPercent(x, places) { return `${pyFixed(x * 100, places)}%`; }

/** The p significant digits of |x| rounded half to even, exactly, and the decimal exponent of the first. */
function roundSignificant(x, p) {
  if (Math.abs(x) >= 1e21) { // beyond toFixed's exact range: JS's own rounding (no tie at these magnitudes in practice)
    const [m, e] = Math.abs(x).toExponential(p - 1).split("e");
    return [m.replace(".", ""), Number(e)];
  }
  const [intPart, frac] = Math.abs(x).toFixed(100).split(".");
  const all = intPart + frac;
  const first = all.search(/[1-9]/);
  let exp = intPart.length - first - 1;
  const kept = BigInt(all.slice(first, first + p));
  const rest = all.slice(first + p);
  const half = "5".padEnd(rest.length, "0");
  const up = rest > half || (rest === half && kept % 2n === 1n);
  let digits = (up ? kept + 1n : kept).toString();
  if (digits.length > p) { digits = digits.slice(0, p); exp += 1; } // 9.995 -> 10.0: one more place
  return [digits, exp];
}

/** Python f"{x:.{p}g}": p significant digits, scientific below 1e-4 or from 10^p, trailing zeros dropped. */
export function pyGeneral(x, p = 6) {
  if (!Number.isFinite(x)) return Number.isNaN(x) ? "nan" : (x > 0 ? "inf" : "-inf");
  if (x === 0) return sign(x, "0");
  const [digits, exp] = roundSignificant(x, p);
  const strip = (s) => (s.includes(".") ? s.replace(/0+$/, "").replace(/\.$/, "") : s);
  if (exp >= -4 && exp < p) {
    const text = exp >= 0 ? `${digits.slice(0, exp + 1).padEnd(exp + 1, "0")}.${digits.slice(exp + 1)}`
      : `0.${"0".repeat(-exp - 1)}${digits}`;
    return sign(x, strip(text));
  }
  const mantissa = strip(`${digits[0]}.${digits.slice(1)}`);
  return sign(x, `${mantissa}e${exp < 0 ? "-" : "+"}${String(Math.abs(exp)).padStart(2, "0")}`);
}
