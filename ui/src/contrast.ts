// WCAG 2 contrast: relative luminance of an sRGB colour and the ratio of two of them
// (https://www.w3.org/TR/WCAG22/#dfn-contrast-ratio). Pure; src/contrast.test.ts checks the
// colour pairs style.css draws against it.

/** An sRGB colour, channels 0–255. */
export interface Rgb {
  r: number;
  g: number;
  b: number;
}

/** Parses `#rgb` or `#rrggbb`; anything else throws, so a colour the check cannot read fails it. */
export function parseHex(text: string): Rgb {
  const hex = text.trim().toLowerCase();
  const short = /^#([0-9a-f])([0-9a-f])([0-9a-f])$/.exec(hex);
  if (short !== null) {
    const [r, g, b] = short.slice(1).map((d) => parseInt(d + d, 16)) as [number, number, number];
    return { r, g, b };
  }
  const long = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/.exec(hex);
  if (long !== null) {
    const [r, g, b] = long.slice(1).map((d) => parseInt(d, 16)) as [number, number, number];
    return { r, g, b };
  }
  throw new Error(`not a #rgb or #rrggbb colour: ${text}`);
}

/** Relative luminance, 0 (black) to 1 (white). */
export function luminance({ r, g, b }: Rgb): number {
  return 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b);
}

/** The contrast ratio of two colours, 1 to 21, whichever is lighter. */
export function contrast(a: Rgb, b: Rgb): number {
  const [hi, lo] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (hi + 0.05) / (lo + 0.05);
}

/** `fg` drawn at `alpha` (CSS `opacity`) over `bg`, composited as browsers do, in sRGB. */
export function over(fg: Rgb, alpha: number, bg: Rgb): Rgb {
  const mix = (f: number, b: number): number => Math.round(f * alpha + b * (1 - alpha));
  return { r: mix(fg.r, bg.r), g: mix(fg.g, bg.g), b: mix(fg.b, bg.b) };
}

/** WCAG AA minimums: text (1.4.3) and the parts of controls and focus indicators (1.4.11). */
export const AA_TEXT = 4.5;
export const AA_NON_TEXT = 3;

function linear(channel: number): number {
  const c = channel / 255;
  return c <= 0.04045 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
}
