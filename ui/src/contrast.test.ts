import { describe, expect, it } from "vitest";
import css from "./style.css?raw";
import { AA_NON_TEXT, AA_TEXT, contrast, luminance, over, parseHex, type Rgb } from "./contrast";
import { customProperties, rules, type Scheme } from "./stylesheet";

/**
 * The colour pairs the app draws, by custom property: `fg` on `bg`, at `min`. `alpha` is an
 * `opacity` the foreground is drawn at. Text is held to 4.5:1 (WCAG 1.4.3, all of it is under
 * 18.66px bold); the boundaries of fields and controls and the focus ring to 3:1 (1.4.11).
 * Decorative hairlines (`--border`, `--*-line`), stripes and the logo are not in it: 1.4.11
 * exempts what carries no information a person needs to use the window.
 */
interface Pair {
  fg: string;
  bg: string;
  min: number;
  alpha?: number;
  /** Where the app draws it. */
  what: string;
}

const SURFACES = ["--bg", "--surface", "--surface-2"];

const text = (fg: string, bg: string, what: string, alpha?: number): Pair => ({ fg, bg, min: AA_TEXT, what, ...(alpha === undefined ? {} : { alpha }) });
const ui = (fg: string, bg: string, what: string): Pair => ({ fg, bg, min: AA_NON_TEXT, what });

const PAIRS: Pair[] = [
  // Body and secondary text wherever it sits: the window, panels, panel heads and folded
  // details, code and chips, the timeline's bands.
  ...SURFACES.flatMap((bg) => [text("--text", bg, "body text"), text("--muted", bg, "muted text (.muted, dt, labels, the tabs)")]),
  text("--text", "--code-bg", "code, chips, the tool name"),
  text("--muted", "--code-bg", "a digest chip (.record-grid .digest)"),
  text("--muted", "--band-0", "a launch band's label in the timeline"),
  text("--muted", "--band-1", "a launch band's label in the timeline (the other shade)"),
  text("--text", "--bg", "the home path (.home code, opacity 0.8)", 0.8),
  text("--text", "--surface", "a server's command (.server-cmd, opacity 0.85)", 0.85),

  // Each status colour on its own background: pills, badges, callouts, risk lines.
  text("--ok-fg", "--ok-bg", "ok pill, badge, calm line, restart note"),
  text("--warn-fg", "--warn-bg", "warn pill, badge, caution line, waiting button"),
  text("--bad-fg", "--bad-bg", "bad pill, badge, danger line, errors"),
  text("--idle-fg", "--idle-bg", "idle pill and badge"),
  text("--unpinned-fg", "--unpinned-bg", "the unpinned badge"),
  // Body text inside a warn or bad callout, and what a callout adds.
  text("--text", "--warn-bg", "text in a warn callout or notice"),
  text("--text", "--bad-bg", "text in a bad callout or notice"),
  text("--muted", "--bad-bg", "a muted line in an escalation callout"),
  text("--warn-fg", "--bad-bg", "the hint of a bad callout (.callout-hint)"),
  // Status colours as text on a panel: saved / failed notes, Deny and Remove, the urgent
  // countdown, the unpinned reason, a callout's hint.
  text("--ok-fg", "--surface", "a saved note (.form-status), the connected line"),
  text("--warn-fg", "--surface", "the unpinned reason, a withheld credential"),
  text("--warn-fg", "--surface-2", "a callout's hint (.callout-hint)"),
  text("--bad-fg", "--surface", "Deny, Remove, a failed note, the urgent countdown"),
  text("--bad-fg", "--surface-2", "Deny and Remove hovered, an escalation in a callout"),

  // Buttons: the primary one, a link, the chosen lifetime, a key hint on a lifetime.
  text("--on-accent", "--accent", "the primary button's text"),
  text("--on-accent", "--accent-hover", "the primary button's text, hovered"),
  text("--accent", "--surface", "a link button (button.link), a lane title hovered"),
  text("--accent", "--surface-2", "a lane title hovered, on an even lane"),
  text("--surface", "--text", "the chosen lifetime (.lifetime.checked)"),
  text("--text", "--surface", "a lifetime's key hint (kbd, opacity 0.7)", 0.7),
  text("--surface", "--text", "the chosen lifetime's key hint (kbd, opacity 0.7)", 0.7),

  // Non-text: the edge of a field or control against what it sits on (and, for a field, its
  // own fill), and the focus ring against what surrounds it.
  ...SURFACES.map((bg) => ui("--control-border", bg, "a field's or control's border (--control-border)")),
  ...SURFACES.map((bg) => ui("--accent", bg, "the focus ring (buttons, Activity rows, timeline marks), the primary button's edge")),
  ui("--surface", "--text", "the focus ring inside the chosen lifetime"),
  ...["--surface", "--surface-2"].map((bg) => ui("--bad-control", bg, "the border of Deny and Remove")),
];

const SCHEMES: Scheme[] = ["light", "dark"];

describe("the contrast math", () => {
  it("matches WCAG's known values", () => {
    const white = parseHex("#fff");
    expect(contrast(parseHex("#000"), white)).toBeCloseTo(21, 5);
    expect(contrast(white, white)).toBe(1);
    // #777 on white is the classic near miss: 4.48:1, under AA.
    expect(contrast(parseHex("#777777"), white)).toBeCloseTo(4.48, 2);
    expect(contrast(parseHex("#767676"), white)).toBeCloseTo(4.54, 2);
    // The order of the two does not matter.
    expect(contrast(white, parseHex("#777"))).toBe(contrast(parseHex("#777"), white));
    // Luminance: the channels weigh 0.2126, 0.7152, 0.0722.
    expect(luminance(parseHex("#ff0000"))).toBeCloseTo(0.2126, 4);
    expect(luminance(parseHex("#00ff00"))).toBeCloseTo(0.7152, 4);
    expect(luminance(parseHex("#0000ff"))).toBeCloseTo(0.0722, 4);
    // The linear segment of sRGB below 0.04045.
    expect(luminance(parseHex("#0a0a0a"))).toBeCloseTo(10 / 255 / 12.92, 6);
  });

  it("composites an opacity in sRGB", () => {
    expect(over(parseHex("#000000"), 0.5, parseHex("#ffffff"))).toEqual({ r: 128, g: 128, b: 128 });
    expect(over(parseHex("#123456"), 1, parseHex("#ffffff"))).toEqual(parseHex("#123456"));
  });

  it("refuses a colour it cannot read", () => {
    expect(() => parseHex("rgb(0 0 0)")).toThrow();
    expect(() => parseHex("#12345")).toThrow();
  });
});

describe("style.css", () => {
  it("reads both schemes' custom properties", () => {
    const light = customProperties(css, "light");
    const dark = customProperties(css, "dark");
    expect(light.get("--bg")).toMatch(/^#/);
    expect(dark.get("--bg")).not.toBe(light.get("--bg"));
    // A property only the light :root declares still holds in dark.
    expect(dark.get("--font")).toBe(light.get("--font"));
  });

  for (const scheme of SCHEMES) {
    it(`meets WCAG AA for every pair it draws, ${scheme}`, () => {
      const props = customProperties(css, scheme);
      const color = (name: string): Rgb => {
        const value = props.get(name);
        if (value === undefined) throw new Error(`${name} is not declared (${scheme})`);
        return parseHex(value);
      };
      const failing = PAIRS.flatMap((p) => {
        const bg = color(p.bg);
        const fg = p.alpha === undefined ? color(p.fg) : over(color(p.fg), p.alpha, bg);
        const ratio = contrast(fg, bg);
        return ratio >= p.min ? [] : [`${p.fg}${p.alpha === undefined ? "" : `@${p.alpha}`} on ${p.bg}: ${ratio.toFixed(2)}:1 < ${p.min}:1 (${p.what})`];
      });
      expect(failing).toEqual([]);
    });
  }

  it("has the pairs the table names where the rules draw them", () => {
    // The table is kept honest against the rules: each of these is drawn as said.
    const drawn = (selector: string, property: string): string | undefined =>
      rules(css)
        .filter((r) => r.media === null && r.selector.split(",").map((s) => s.trim()).includes(selector))
        .flatMap((r) => r.declarations)
        .filter(([p]) => p === property)
        .pop()?.[1];
    expect(drawn("button", "border")).toContain("var(--control-border)");
    expect(drawn("input[type=\"text\"]", "border")).toContain("var(--control-border)");
    expect(drawn(".field-input input", "border")).toContain("var(--control-border)");
    expect(drawn(".lifetimes", "border")).toContain("var(--control-border)");
    expect(drawn("button:focus-visible", "outline")).toContain("var(--accent)");
    expect(drawn("button.primary", "color")).toBe("var(--on-accent)");
    expect(drawn("button.primary", "background")).toBe("var(--accent)");
    expect(drawn(".lifetimes button.lifetime", "border-left")).toContain("var(--control-border)");
    expect(drawn(".lifetimes button.lifetime.checked:focus-visible", "outline-color")).toBe("var(--surface)");
    expect(drawn("button.primary:hover:not(:disabled)", "background")).toBe("var(--accent-hover)");
    expect(drawn(".action-error button.link", "color")).toBe("inherit");
    // Focus rings that are not a button's: an Activity row, a timeline mark.
    expect(drawn(".activity-row:focus-visible", "outline")).toContain("var(--accent)");
    expect(drawn(".timeline-svg .mark:focus .hit", "stroke")).toBe("var(--accent)");
    expect(drawn("button.deny", "border-color")).toBe("var(--bad-control)");
    expect(drawn("button.danger", "border-color")).toBe("var(--bad-control)");
  });
});
