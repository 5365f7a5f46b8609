/**
 * The console's routes, read from the address bar: `/` (runs, filters in the
 * query string), `/runs/{run_id}`, `/gates`, `/workflows`, `/workflows/{id}`,
 * `/schedules` and `/limits` (a limit and key in the query string). Any of
 * them can be loaded directly (a reload, a shared link): Workers static assets
 * answer every navigation that is not a file with index.html
 * (`not_found_handling = "single-page-application"`), and this module picks
 * the page. In-app links use the History API, so the page does not reload.
 */
import type { ComponentChildren } from "preact";
import { useEffect, useState } from "preact/hooks";
import { parseRoute, type Route } from "./routes.ts";

export type { Route } from "./routes.ts";

const NAVIGATED_EVENT = "trellis:navigated";

/** Goes to `href` without reloading the page. */
export function navigate(href: string): void {
  history.pushState(null, "", href);
  window.dispatchEvent(new Event(NAVIGATED_EVENT));
}

/** The current route; re-renders on back/forward and on {@link navigate}. */
export function useRoute(): Route {
  const read = (): Route => parseRoute(location.pathname, location.search);
  const [route, setRoute] = useState(read);
  useEffect(() => {
    const update = (): void => setRoute(read());
    window.addEventListener("popstate", update);
    window.addEventListener(NAVIGATED_EVENT, update);
    return () => {
      window.removeEventListener("popstate", update);
      window.removeEventListener(NAVIGATED_EVENT, update);
    };
  }, []);
  return route;
}

/** An in-app link: a plain `<a href>` (it opens in a new tab as usual) that navigates in place on a plain click. */
export function Link(props: { href: string; class?: string; title?: string; children: ComponentChildren }) {
  const onClick = (event: MouseEvent): void => {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) {
      return;
    }
    event.preventDefault();
    navigate(props.href);
  };
  return (
    <a href={props.href} class={props.class} title={props.title} onClick={onClick}>
      {props.children}
    </a>
  );
}
