// Reads style.css as data, for the checks that keep it honest (src/contrast.test.ts,
// src/scale.test.ts): its rules, and the custom properties each colour scheme resolves to. Enough
// CSS for this one file (style rules, one level of @media); it throws on what it cannot read.

/** One style rule: the @media it sits in (or null), its selector, its declarations in order. */
export interface Rule {
  media: string | null;
  selector: string;
  declarations: [property: string, value: string][];
}

export type Scheme = "light" | "dark";

/** The style rules of `css`, top to bottom. */
export function rules(css: string): Rule[] {
  const out: Rule[] = [];
  const walk = (text: string, media: string | null): void => {
    let at = 0;
    for (;;) {
      const open = text.indexOf("{", at);
      if (open < 0) {
        if (text.slice(at).trim() !== "") throw new Error(`stray text in style.css: ${text.slice(at).trim().slice(0, 60)}`);
        return;
      }
      const close = matching(text, open);
      const prelude = text.slice(at, open).trim();
      const body = text.slice(open + 1, close);
      if (prelude.startsWith("@media")) {
        if (media !== null) throw new Error(`nested @media in style.css: ${prelude}`);
        walk(body, prelude);
      } else if (prelude.startsWith("@")) {
        throw new Error(`an at-rule the check cannot read: ${prelude}`);
      } else {
        out.push({ media, selector: prelude.replace(/\s+/g, " "), declarations: declarations(body) });
      }
      at = close + 1;
    }
  };
  walk(css.replace(/\/\*[\s\S]*?\*\//g, ""), null);
  return out;
}

/**
 * The custom properties of `:root` in `scheme`: the light ones, then (for dark) those of every
 * `@media (prefers-color-scheme: dark)` `:root` over them; `var(--x)` values resolved.
 */
export function customProperties(css: string, scheme: Scheme): Map<string, string> {
  const props = new Map<string, string>();
  const roots = rules(css).filter((r) => r.selector === ":root");
  const light = roots.filter((r) => r.media === null);
  const dark = roots.filter((r) => r.media !== null && /prefers-color-scheme:\s*dark/.test(r.media));
  for (const rule of scheme === "light" ? light : [...light, ...dark]) {
    for (const [property, value] of rule.declarations) if (property.startsWith("--")) props.set(property, value);
  }
  const resolve = (value: string, depth: number): string =>
    value.replace(/var\((--[\w-]+)\)/g, (_, name: string) => {
      const next = props.get(name);
      if (next === undefined || depth > 8) throw new Error(`unresolved ${name} in ${scheme}`);
      return resolve(next, depth + 1);
    });
  for (const [name, value] of props) props.set(name, resolve(value, 0));
  return props;
}

function declarations(body: string): [string, string][] {
  if (body.includes("{")) throw new Error(`a nested block the check cannot read: ${body.trim().slice(0, 60)}`);
  return body
    .split(";")
    .map((d) => d.trim())
    .filter((d) => d !== "")
    .map((d) => {
      const colon = d.indexOf(":");
      if (colon < 0) throw new Error(`not a declaration: ${d}`);
      return [d.slice(0, colon).trim(), d.slice(colon + 1).trim().replace(/\s+/g, " ")];
    });
}

/** The index of the `}` that closes the `{` at `open`. */
function matching(text: string, open: number): number {
  let depth = 0;
  for (let i = open; i < text.length; i++) {
    const c = text[i];
    if (c === '"' || c === "'") {
      const end = text.indexOf(c, i + 1);
      if (end < 0) throw new Error("an unterminated string in style.css");
      i = end;
    } else if (c === "{") {
      depth++;
    } else if (c === "}" && --depth === 0) {
      return i;
    }
  }
  throw new Error("an unclosed block in style.css");
}
