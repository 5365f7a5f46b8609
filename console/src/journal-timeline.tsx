/**
 * The journal as a timeline: one row per entry (seq, kind, time, node, step,
 * summary, and under it who caused the entry when it carries `by`), each
 * expandable to the entry in full.
 */
import { useState } from "preact/hooks";
import type { ReceivedEntry } from "./events.ts";
import { summarizeEntry } from "./journal-summary.ts";
import { JsonBlock } from "./ui.tsx";

export function JournalTimeline(props: { entries: readonly ReceivedEntry[] }) {
  const [open, setOpen] = useState<ReadonlySet<number>>(new Set());
  const toggle = (seq: number): void => {
    const next = new Set(open);
    if (next.has(seq)) {
      next.delete(seq);
    } else {
      next.add(seq);
    }
    setOpen(next);
  };
  return (
    <ol class="timeline">
      {props.entries.map(({ entry, raw }) => {
        const line = summarizeEntry(entry.kind, entry.body);
        const expanded = open.has(entry.seq);
        return (
          <li key={entry.seq} class={`entry kind-${entry.kind.replace(/\./g, "-")}`} data-seq={entry.seq}>
            <button type="button" class="entry-line" aria-expanded={expanded} onClick={() => toggle(entry.seq)}>
              <span class="seq">#{entry.seq}</span>
              <span class="kind">{entry.kind}</span>
              <time dateTime={entry.at} title={entry.at}>
                {timeOfDay(entry.at)}
              </time>
              <span class="node">{line.node ?? ""}</span>
              <span class="step">{line.step ?? ""}</span>
              <span class="summary">{line.summary}</span>
              {line.by === undefined ? null : <span class="by">by {line.by}</span>}
            </button>
            {expanded ? <JsonBlock value={raw} /> : null}
          </li>
        );
      })}
    </ol>
  );
}

/** `HH:MM:SS.mmm` in local time. */
function timeOfDay(iso: string): string {
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) {
    return iso;
  }
  const pad = (n: number, width = 2): string => String(n).padStart(width, "0");
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
}
