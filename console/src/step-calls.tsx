/**
 * A dispatch's steps in the node panel: one row per step (name, action,
 * status, a bar on the dispatch's time axis, its calls, its error), and under
 * it each call of the step: how it went, how long it took, its error, the
 * wait before the next call, and what it did; an `llm` call with its model,
 * the messages sent, the answer, tokens and cost (calls.ts reads them).
 */
import type { DispatchView } from "../../schemas/api.ts";
import type { StepRecord } from "../../schemas/payload.ts";
import { callLines, formatMs, formatUsd, type CallLine, type LlmCall } from "./calls.ts";
import { stepName, type PlanStep } from "./plan-graph.ts";
import { sequentialBars, type Bar } from "./time-axis.ts";
import { StatusBadge } from "./ui.tsx";

const STEP_COLUMNS = 6;

export function DispatchSteps(props: { dispatch: DispatchView; node: string; plan: readonly PlanStep[] | null }) {
  const { dispatch } = props;
  const axis = sequentialBars(
    dispatch.steps.map((step, index) => ({ id: String(index), durationMs: step.duration_ms })),
  );
  return (
    <div class="table-scroll">
      <table class="steps" data-dispatch={dispatch.seq}>
        <caption>
          #{dispatch.seq} {dispatch.kind}, attempt {dispatch.attempt} · {formatMs(axis.spanMs)} of steps
        </caption>
        <tbody>
          {dispatch.steps.map((step, index) => (
            <StepRows
              key={`${step.step}-${index}`}
              step={step}
              name={stepName(step.step, props.node, props.plan)}
              bar={axis.bars[index]}
            />
          ))}
        </tbody>
      </table>
    </div>
  );
}

function StepRows(props: { step: StepRecord; name: string; bar: Bar | undefined }) {
  const { step, bar } = props;
  const calls = callLines(step);
  return (
    <>
      <tr class="step-row" data-step={step.step}>
        <td>{props.name}</td>
        <td class="mono">{step.action}</td>
        <td>
          <StatusBadge status={step.status} />
        </td>
        <td class="duration">
          <span class="bar-track" title={`${step.duration_ms} ms`}>
            {bar === undefined ? null : (
              <span
                class={`bar status-${step.status}`}
                style={{ left: `${bar.leftPct}%`, width: `${bar.widthPct}%` }}
              />
            )}
          </span>
          {step.duration_ms} ms
        </td>
        <td>{step.attempts.length} call(s)</td>
        <td class="error-cell">{step.error === undefined ? "" : `${step.error.code}: ${step.error.message}`}</td>
      </tr>
      {calls.length === 0 ? null : (
        <tr class="calls-row">
          <td colSpan={STEP_COLUMNS}>
            <ol class="calls">
              {calls.map((call) => (
                <CallItem key={call.attempt} call={call} />
              ))}
            </ol>
          </td>
        </tr>
      )}
    </>
  );
}

function CallItem(props: { call: CallLine }) {
  const { call } = props;
  return (
    <li class={`call ${call.ok ? "call-ok" : "call-failed"}`} data-call={call.attempt}>
      <span class="call-head">
        call {call.attempt} · <StatusBadge status={call.ok ? "completed" : "failed"} /> · {formatMs(call.durationMs)}
      </span>
      {call.detail === null ? null : <span class="mono call-detail"> · {call.detail}</span>}
      {call.error === null ? null : <div class="error">{call.error}</div>}
      {call.retry === null ? null : <div class="retry">{call.retry}</div>}
      {call.llm === null ? null : <LlmDetails llm={call.llm} />}
    </li>
  );
}

function LlmDetails(props: { llm: LlmCall }) {
  const { llm } = props;
  return (
    <div class="llm">
      <dl class="llm-facts">
        <dt>model</dt>
        <dd class="mono">
          {llm.model} ({llm.provider})
        </dd>
        <dt>tokens</dt>
        <dd>{llm.tokens === null ? "–" : `${llm.tokens.input} in · ${llm.tokens.output} out`}</dd>
        <dt>cost</dt>
        <dd>{llm.costUsd === null ? "–" : formatUsd(llm.costUsd)}</dd>
        <dt>finish</dt>
        <dd>{llm.finishReason ?? "–"}</dd>
      </dl>
      <h4>prompt</h4>
      {llm.messagesCut !== null ? <pre class="message">{llm.messagesCut}</pre> : null}
      {llm.messages.map((message, index) => (
        <div key={index} class="message-row">
          <span class="role">{message.role}</span>
          <pre class="message">{message.content}</pre>
        </div>
      ))}
      {llm.toolCalls.length > 0 && (llm.answer ?? "") === "" ? (
        <>
          <h4>asked for tools</h4>
          <pre class="message answer">{llm.toolCalls.join(", ")}</pre>
        </>
      ) : (
        <>
          <h4>answer</h4>
          <pre class="message answer">{llm.answer ?? "no answer"}</pre>
        </>
      )}
    </div>
  );
}
