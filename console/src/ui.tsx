/** Small pieces every page uses: status badges, times, errors and JSON. */
import type { ComponentChildren } from "preact";
import { describeError } from "./api.ts";

/** A run, node or gate status as a coloured badge (console.css `.status-<name>`). */
export function StatusBadge(props: { status: string }) {
  return <span class={`badge status-${props.status}`}>{props.status}</span>;
}

/** An ISO time as local date and time, the ISO text on hover. */
export function Time(props: { at: string | null | undefined }) {
  if (props.at === null || props.at === undefined || props.at === "") {
    return <span class="muted">–</span>;
  }
  const date = new Date(props.at);
  return (
    <time dateTime={props.at} title={props.at}>
      {Number.isNaN(date.getTime()) ? props.at : date.toLocaleString()}
    </time>
  );
}

/** A failed request or action, with the API's code and the paths of its details. */
export function ErrorNote(props: { error: unknown }) {
  if (props.error === null || props.error === undefined) {
    return null;
  }
  return (
    <p class="error" role="alert">
      {describeError(props.error)}
    </p>
  );
}

/** JSON, pretty-printed. */
export function JsonBlock(props: { value: unknown }) {
  return <pre class="json">{JSON.stringify(props.value, null, 2)}</pre>;
}

/** A titled block of a page. */
export function Section(props: { title: string; children: ComponentChildren; actions?: ComponentChildren }) {
  return (
    <section class="panel">
      <header class="panel-head">
        <h2>{props.title}</h2>
        {props.actions}
      </header>
      {props.children}
    </section>
  );
}
