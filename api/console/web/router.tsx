// A tiny router over the History API. Why not a router library: the console's URL space is a
// fixed table of a dozen patterns, the server already answers index.html for every page path
// under /console/ (api/console/static.ts), and what a page needs is the path, its parameters and
// the query string. That is pushState, popstate and one regular expression per pattern, about
// fifty lines; a dependency would add bytes to every first load and an API of its own, for
// nothing the console uses.
import type { ComponentChildren, JSX, PartialAnchorHTMLAttributes } from "preact";
import { useEffect, useState } from "preact/hooks";

export const BASE = "/console";

const listeners = new Set<() => void>();
/** Whether the app navigated since it loaded (a page then takes the focus on its heading). */
let navigated = false;

export function hasNavigated(): boolean {
  return navigated;
}

/** Goes to a console URL ("/console/..."), adding a history entry unless `replace`. */
export function navigate(to: string, replace = false): void {
  const current = location.pathname + location.search;
  if (to !== current) {
    if (replace) history.replaceState(null, "", to);
    else history.pushState(null, "", to);
  }
  navigated = true;
  for (const l of listeners) l();
}

addEventListener("popstate", () => {
  navigated = true;
  for (const l of listeners) l();
});

export interface Location {
  path: string;
  query: URLSearchParams;
}

function current(): Location {
  return { path: location.pathname.replace(/\/+$/, "") || "/", query: new URLSearchParams(location.search) };
}

/** The current location; re-renders on every navigation. */
export function useLocation(): Location {
  const [loc, setLoc] = useState(current);
  useEffect(() => {
    const l = () => setLoc(current());
    listeners.add(l);
    return () => void listeners.delete(l);
  }, []);
  return loc;
}

/** The parameters of `path` for `pattern` ("/services/:appId"), relative to BASE; null when it does not match. */
export function match(pattern: string, path: string): Record<string, string> | null {
  const names: string[] = [];
  const source = pattern.replace(/:([A-Za-z]+)/g, (_, name: string) => {
    names.push(name);
    return "([^/]+)";
  });
  const m = new RegExp(`^${BASE}${source}$`).exec(path);
  if (!m) return null;
  const params: Record<string, string> = {};
  names.forEach((n, i) => (params[n] = decodeURIComponent(m[i + 1] ?? "")));
  return params;
}

/** A console URL: BASE + path segments (each encoded) + an optional query. */
export function href(path: string, query?: Record<string, string | number | boolean | undefined>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(query ?? {})) if (v !== undefined && v !== "" && v !== false) q.set(k, String(v));
  const s = q.toString();
  return `${BASE}${path}${s ? `?${s}` : ""}`;
}

/** Encodes one path segment. */
export const seg = encodeURIComponent;

type LinkProps = Omit<PartialAnchorHTMLAttributes<HTMLAnchorElement>, "href" | "role"> & { href: string; children?: ComponentChildren };

/** An <a> that navigates within the app (a modified or middle click opens it as a browser would). */
export function Link({ href: to, children, ...rest }: LinkProps): JSX.Element {
  const onClick = (e: MouseEvent) => {
    if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(to);
  };
  return (
    <a href={to} onClick={onClick} {...rest}>
      {children}
    </a>
  );
}

/** A navigation link that says so (aria-current) when it names the current page or, with `prefix`, one under it. */
export function NavLink({ href: to, prefix, children }: { href: string; prefix?: boolean; children: ComponentChildren }): JSX.Element {
  const { path } = useLocation();
  const target = to.split("?")[0] ?? to;
  const here = path === target || (prefix === true && path.startsWith(`${target}/`));
  return (
    <Link href={to} aria-current={here ? "page" : undefined}>
      {children}
    </Link>
  );
}
