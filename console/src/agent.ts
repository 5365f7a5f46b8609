/**
 * What the node panel says of an agent's loop (the node view's `agent`,
 * docs/api.md): its turns, each with the tool calls it asked for, and what
 * the loop spent against what its step allows. Pure, so it is unit-tested
 * (test/node/console-agent.test.ts).
 */
import type { AgentView } from "../../schemas/api.ts";
import { formatMs, formatUsd, Recorded, recordedText } from "./calls.ts";

export type AgentTurnView = AgentView["turns"][number];
export type AgentToolCall = AgentView["tool_calls"][number];

/** One turn of the conversation and the tool calls it asked for, in their order. */
export interface ConversationTurn {
  turn: AgentTurnView;
  calls: AgentToolCall[];
}

/** The loop as a conversation: each turn followed by its calls (a call of a turn not listed is kept, at its turn). */
export function conversationOf(agent: AgentView): ConversationTurn[] {
  const byTurn = new Map<number, AgentToolCall[]>();
  for (const call of agent.tool_calls) {
    byTurn.set(call.turn, [...(byTurn.get(call.turn) ?? []), call]);
  }
  return agent.turns.map((turn) => ({
    turn,
    calls: (byTurn.get(turn.turn) ?? []).toSorted((a, b) => a.index - b.index),
  }));
}

/** Counts as the console writes them: `5,000`. */
function count(value: number): string {
  return value.toLocaleString("en-US");
}

/**
 * What the loop spent against its limits, one phrase each: `3 of 8 turns`
 * (repairs are not counted, as `max_turns` does not count them), `812 of
 * 5,000 tokens` (input plus output, as the budget counts them), `$0.0021 of $0.50`.
 */
export function budgetLines(agent: AgentView): string[] {
  const turns = agent.turns.filter((turn) => turn.repair === undefined).length;
  const tokens = agent.usage.tokens.input + agent.usage.tokens.output;
  const budget = agent.budget;
  return [
    `${turns} of ${agent.max_turns} turns`,
    budget?.tokens === undefined ? `${count(tokens)} tokens` : `${count(tokens)} of ${count(budget.tokens)} tokens`,
    budget?.cost_usd === undefined
      ? formatUsd(agent.usage.cost_usd)
      : `${formatUsd(agent.usage.cost_usd)} of ${formatUsd(budget.cost_usd)}`,
  ];
}

/** A turn at a glance: `gpt-4o (openai) · 120 in · 30 out · $0.0012 · tool-calls`. */
export function turnLine(turn: AgentTurnView): string {
  const { model, provider, tokens, cost_usd, finish_reason } = turn;
  return `${model} (${provider}) · ${count(tokens.input)} in · ${count(tokens.output)} out · ${formatUsd(cost_usd)} · ${finish_reason}`;
}

/** The text a turn's model wrote, whole or as its preview; null when it wrote none. */
export function answerText(turn: AgentTurnView): string | null {
  const answer = turn.answer;
  if (typeof answer === "string") {
    return answer;
  }
  const recorded = Recorded.safeParse(answer);
  return recorded.success ? recordedText(recorded.data) : null;
}

/** A call at a glance: its attempts and duration, e.g. `2 attempts · 41 ms`. */
export function callFacts(call: AgentToolCall): string {
  const attempts = `${call.attempts} attempt${call.attempts === 1 ? "" : "s"}`;
  return call.duration_ms === undefined ? attempts : `${attempts} · ${formatMs(call.duration_ms)}`;
}
