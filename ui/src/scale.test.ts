import { describe, expect, it } from "vitest";
import css from "./style.css?raw";
import { rules } from "./stylesheet";

/**
 * Every font size, corner radius, margin, padding and gap in `css` that is not a step of the
 * scales its `:root` defines (`--text-*`, `--radius-*`, `--space-*`): "selector { property:
 * value }", one per literal.
 */
function offScale(stylesheet: string): string[] {
  const off: string[] = [];
  for (const rule of rules(stylesheet)) {
    if (rule.selector === ":root") continue;
    for (const [property, value] of rule.declarations) {
      const ok =
        property === "font-size"
          ? value === "inherit" || /^var\(--text-[a-z]+\)$/.test(value)
          : property === "font"
            ? value === "inherit" || (value.includes("var(--text-") && !/(^|\s)[\d.]+(px|r?em|pt|%)\b/.test(value))
            : /^border(-[a-z]+)*-radius$/.test(property)
              ? value.split(" ").every((v) => v === "0" || /^var\(--radius-[a-z]+\)$/.test(v))
              : SPACING.test(property)
                ? onSpacingScale(value)
                : true;
      if (!ok) off.push(`${rule.selector} { ${property}: ${value} }`);
    }
  }
  return off;
}

/** The properties that space things out. */
const SPACING = /^(margin|padding)(-[a-z]+)*$|^(row-|column-)?gap$/;

/**
 * A spacing value made of the scale: each part `0`, `auto`, a `var(--space-N)`, or a `calc()`
 * of steps with plain numbers and other custom properties (a layout width such as
 * `--legend-width`); no length written out.
 */
function onSpacingScale(value: string): boolean {
  return parts(value).every((part) => {
    if (part === "0" || part === "auto" || STEP.test(part)) return true;
    if (!part.startsWith("calc(") || !part.includes("var(--space-")) return false;
    return /^[\s\d.+\-*/()]*$/.test(part.slice("calc".length).replace(/var\(--[a-z0-9-]+\)/g, ""));
  });
}

const STEP = /^var\(--space-[1-6]\)$/;

/** A value's space-separated parts, a parenthesized group kept whole. */
function parts(value: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let part = "";
  for (const c of value.trim()) {
    if (c === "(") depth++;
    if (c === ")") depth--;
    if (/\s/.test(c) && depth === 0) {
      if (part !== "") out.push(part);
      part = "";
    } else part += c;
  }
  if (part !== "") out.push(part);
  return out;
}

/** The steps `css`'s light `:root` defines for `prefix` (e.g. `--text-`), name to value. */
function steps(stylesheet: string, prefix: string): Record<string, string> {
  const root = rules(stylesheet).filter((r) => r.selector === ":root" && r.media === null);
  return Object.fromEntries(root.flatMap((r) => r.declarations).filter(([p]) => p.startsWith(prefix)));
}

describe("style.css's scales", () => {
  it("has one type scale, one radius scale and one spacing scale", () => {
    expect(steps(css, "--text-")).toEqual({ "--text-xs": "11px", "--text-sm": "12.5px", "--text-md": "14px", "--text-lg": "16px" });
    expect(steps(css, "--radius-")).toEqual({ "--radius-sm": "4px", "--radius-md": "7px", "--radius-lg": "10px", "--radius-pill": "999px" });
    expect(steps(css, "--space-")).toEqual({ "--space-1": "2px", "--space-2": "4px", "--space-3": "8px", "--space-4": "12px", "--space-5": "16px", "--space-6": "24px" });
  });

  it("sets no font size, radius, margin, padding or gap off those scales", () => {
    expect(offScale(css)).toEqual([]);
  });

  it("catches a literal added anywhere", () => {
    expect(offScale(`${css}\n.x { font-size: 13.5px; }`)).toEqual([".x { font-size: 13.5px }"]);
    expect(offScale(`${css}\n@media (max-width: 600px) { .y { border-radius: 5px; } }`)).toEqual([".y { border-radius: 5px }"]);
    expect(offScale(".z { border-top-left-radius: var(--radius-sm) 3px; }")).toEqual([".z { border-top-left-radius: var(--radius-sm) 3px }"]);
    expect(offScale(".w { font: 600 13px/1.2 var(--font); }")).toEqual([".w { font: 600 13px/1.2 var(--font) }"]);
    expect(offScale(".v { font-size: 0.9em; }")).toEqual([".v { font-size: 0.9em }"]);
    expect(offScale(".s { padding: 6px 12px; }")).toEqual([".s { padding: 6px 12px }"]);
    expect(offScale(".s { margin: var(--space-2) 10px; gap: 0.5em; }")).toEqual([".s { margin: var(--space-2) 10px }", ".s { gap: 0.5em }"]);
    expect(offScale(".s { margin-left: calc(var(--space-3) + 3px); column-gap: var(--space-7); }")).toEqual([
      ".s { margin-left: calc(var(--space-3) + 3px) }",
      ".s { column-gap: var(--space-7) }",
    ]);
    // The scale's own steps pass, in the shorthand too; 0, auto, and calc() of steps and
    // other custom properties too.
    expect(offScale(".s { margin: 0 auto var(--space-6); padding: calc(-1 * var(--space-4)) calc(var(--legend-width) + var(--space-5)); }")).toEqual([]);
    expect(offScale(".u { font: 600 var(--text-sm)/1.2 var(--font); border-radius: var(--radius-md) 0; }")).toEqual([]);
  });
});
