/**
 * An agent's loop in the node panel, as a conversation: each model turn (its
 * model, tokens, cost, finish reason and what it wrote), then the tool calls
 * it asked for, each one expandable to its input and its output or error;
 * above them, what the loop spent against its step's limits. Read from the
 * node view's `agent` (agent.ts tells it).
 */
import type { AgentView } from "../../schemas/api.ts";
import { answerText, budgetLines, callFacts, conversationOf, turnLine, type AgentToolCall } from "./agent.ts";
import { JsonBlock, StatusBadge } from "./ui.tsx";

export function AgentLoop(props: { agent: AgentView }) {
  const { agent } = props;
  const hidden = agent.tool_calls_total - agent.tool_calls.length;
  return (
    <div class="agent" data-agent={agent.step}>
      <h3>agent loop · step {agent.step}</h3>
      <p class="agent-budget" data-agent-budget>
        {budgetLines(agent).join(" · ")}
      </p>
      <ol class="agent-turns">
        {conversationOf(agent).map(({ turn, calls }) => {
          const text = answerText(turn);
          return (
            <li key={turn.turn} class="agent-turn" data-turn={turn.turn}>
              <div class="turn-head">
                <strong>turn {turn.turn}</strong>
                {turn.repair === undefined ? null : " (repair)"} · <span class="mono">{turnLine(turn)}</span>
              </div>
              {text === null ? null : <pre class="message answer">{text}</pre>}
              {calls.length === 0 ? null : (
                <ul class="tool-calls">
                  {calls.map((call) => (
                    <ToolCall key={call.index} call={call} />
                  ))}
                </ul>
              )}
            </li>
          );
        })}
      </ol>
      {hidden <= 0 ? null : (
        <p class="muted">
          {hidden} more tool call(s) of {agent.tool_calls_total} are in the journal
        </p>
      )}
    </div>
  );
}

function ToolCall(props: { call: AgentToolCall }) {
  const { call } = props;
  return (
    <li>
      <details class="tool-call" data-tool-call={`${call.turn}/${call.index}`}>
        <summary>
          <span class="mono">{call.name}</span> · <StatusBadge status={call.status} /> · {callFacts(call)}
        </summary>
        <h4>input</h4>
        <JsonBlock value={call.input} />
        {call.error === undefined ? null : (
          <p class="error">
            {call.error.code}: {call.error.message}
          </p>
        )}
        {call.output === undefined ? null : (
          <>
            <h4>output</h4>
            <JsonBlock value={call.output} />
          </>
        )}
      </details>
    </li>
  );
}
