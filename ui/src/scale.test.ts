import { describe, expect, it } from "vitest";
import css from "./style.css?raw";
import { rules } from "./stylesheet";

/**
 * Every font size and corner radius in `css` that is not a step of the scales its `:root`
 * defines (`--text-*`, `--radius-*`): "selector { property: value }", one per literal.
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
              : true;
      if (!ok) off.push(`${rule.selector} { ${property}: ${value} }`);
    }
  }
  return off;
}

/** The steps `css`'s light `:root` defines for `prefix` (e.g. `--text-`), name to value. */
function steps(stylesheet: string, prefix: string): Record<string, string> {
  const root = rules(stylesheet).filter((r) => r.selector === ":root" && r.media === null);
  return Object.fromEntries(root.flatMap((r) => r.declarations).filter(([p]) => p.startsWith(prefix)));
}

describe("style.css's scales", () => {
  it("has one type scale and one radius scale", () => {
    expect(steps(css, "--text-")).toEqual({ "--text-xs": "11px", "--text-sm": "12.5px", "--text-md": "14px", "--text-lg": "16px" });
    expect(steps(css, "--radius-")).toEqual({ "--radius-sm": "4px", "--radius-md": "7px", "--radius-lg": "10px", "--radius-pill": "999px" });
  });

  it("sets no font size or radius off those scales", () => {
    expect(offScale(css)).toEqual([]);
  });

  it("catches a literal added anywhere", () => {
    expect(offScale(`${css}\n.x { font-size: 13.5px; }`)).toEqual([".x { font-size: 13.5px }"]);
    expect(offScale(`${css}\n@media (max-width: 600px) { .y { border-radius: 5px; } }`)).toEqual([".y { border-radius: 5px }"]);
    expect(offScale(".z { border-top-left-radius: var(--radius-sm) 3px; }")).toEqual([".z { border-top-left-radius: var(--radius-sm) 3px }"]);
    expect(offScale(".w { font: 600 13px/1.2 var(--font); }")).toEqual([".w { font: 600 13px/1.2 var(--font) }"]);
    expect(offScale(".v { font-size: 0.9em; }")).toEqual([".v { font-size: 0.9em }"]);
    // The scale's own steps pass, in the shorthand too.
    expect(offScale(".u { font: 600 var(--text-sm)/1.2 var(--font); border-radius: var(--radius-md) 0; }")).toEqual([]);
  });
});
