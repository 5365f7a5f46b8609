#!/usr/bin/env node
/**
 * `trellis`: the command line of the Trellis HTTP API (docs/cli.md).
 *
 *   npx trellis define examples/            register YAML/JSON bundles
 *   npx trellis run fan-out --follow        start a run and watch it
 *   npx trellis plan examples/plan-dependency.json --mode preview   run or preview an agent plan
 *   npx trellis events send order.paid --data '{"order":42}' --id pay-42   resume the runs waiting for it
 *   npx trellis signal run_… order.paid --data '{"order":42}'   the same, to one run only
 *   npx trellis schedule nightly-report trigger --follow   start one run of a schedule now
 *   npx trellis tokens create ci --roles runner --workflows 'billing-*'   a token with roles (admin only)
 *   npx trellis limits status api-quota --key acme   one limit's slots, queue and windows for a key
 *   npx trellis runs | show | tail | gates | answer | approve | cancel | pause | resume | redrive | compensate | delete | erase | verify | mcp tools | schedules | limits | tokens
 *
 * Talks to TRELLIS_URL (default http://127.0.0.1:$PORT, port 8787 without PORT) with TRELLIS_TOKEN
 * (default: the first of API_TOKENS in ./.dev.vars), or --url/--token.
 * Errors print the API's code and message and exit 1; --json prints raw JSON.
 * Runs on Node ≥ 22.18 (type stripping), importing the same modules as the Worker.
 */
import { readFileSync } from "node:fs";
import { Argument, Command, Option } from "commander";
import { Api, CliError } from "./api.ts";
import {
  answerCommand,
  controlCommand,
  defineCommand,
  deleteCommand,
  eraseCommand,
  gatesCommand,
  mcpToolsCommand,
  runCommand,
  runsCommand,
  sendEventCommand,
  showCommand,
  signalCommand,
  tailCommand,
  verifyCommand,
  type EventOptions,
  type Exit,
  type Io,
  type RunOptions,
  type RunsOptions,
} from "./commands.ts";
import { resolveTarget } from "./config.ts";
import { limitsCommand, limitStatusCommand } from "./limits.ts";
import { planCommand, type PlanOptions } from "./plan.ts";
import {
  SCHEDULE_ACTIONS,
  scheduleCommand,
  schedulesCommand,
  type ScheduleAction,
  type ScheduleOptions,
} from "./schedules.ts";
import { TOKEN_ACTIONS, tokensCommand, type TokenAction, type TokenOptions } from "./tokens.ts";

const VERSION = (JSON.parse(readFileSync(new URL("../package.json", import.meta.url), "utf8")) as { version: string })
  .version;
const CONTROLS = ["approve", "cancel", "pause", "resume", "redrive", "compensate"] as const;

export function program(exit: (code: Exit) => void): Command {
  const cli = new Command("trellis")
    .description("Define workflows, start and watch runs, answer gates and verify journals on a Trellis server.")
    .version(VERSION)
    .showHelpAfterError();
  let current: Command = cli;
  cli.hook("preAction", (_program, command) => {
    current = command;
  });
  const io = (): Io => {
    const flags = current.opts<{ url?: string; token?: string; json?: boolean | string }>();
    return { api: new Api(resolveTarget(flags)), json: flags.json === true, out: process.stdout };
  };
  const act =
    <A extends unknown[]>(action: (io: Io, ...args: A) => Promise<Exit>) =>
    async (...args: A) =>
      exit(await action(io(), ...args));
  /** A subcommand with the options every one takes (`answer` uses `--json` for its answer). */
  const command = (parent: Command, name: string, json = true) => {
    const sub = parent
      .command(name)
      .option("--url <url>", "the Trellis server (TRELLIS_URL; default http://127.0.0.1:$PORT, or :8787)")
      .option("--token <token>", "bearer token (TRELLIS_TOKEN; default the first of API_TOKENS in ./.dev.vars)");
    return json ? sub.option("--json", "print the API's JSON instead of text") : sub;
  };
  const builder: Builder = { cli, command, act };
  authoring(builder);
  watching(builder);
  controlling(builder);
  scheduling(builder);
  limiting(builder);
  administering(builder);
  return cli;
}

/** What the command groups below build with: a subcommand with the common options, and an action that exits. */
interface Builder {
  cli: Command;
  command: (parent: Command, name: string, json?: boolean) => Command;
  act: <A extends unknown[]>(action: (io: Io, ...args: A) => Promise<Exit>) => (...args: A) => Promise<void>;
}

/** Registering definitions and starting runs. */
function authoring({ cli, command, act }: Builder): void {
  command(cli, "define")
    .argument("<paths...>", "YAML/JSON bundle files or folders")
    .description("register definitions, as one bundle")
    .action(act((io, paths: string[]) => defineCommand(io, paths)));
  command(cli, "run")
    .argument("<workflow>", "workflow id")
    .description("start a run")
    .option("--input <json|file>", "the run's input: JSON, or a file holding it")
    .option("--version <n>", "a version of the workflow (default: the latest)")
    .addOption(new Option("--mode <mode>", "how it starts").choices(["auto", "approval", "preview"]))
    .option("--idempotency-key <key>", "start at most one run for this key")
    .option("--priority <n>", "its place in the queues of limits: 0 (lowest) to 9 (highest); default 5")
    .option("--wait", "wait until the run ends; exit 1 unless it completed")
    .option("--follow", "show live progress until the run ends; exit 1 unless it completed")
    .action(act((io, workflow: string, options: RunOptions) => runCommand(io, workflow, options)));
  command(cli, "plan")
    .argument("<file>", "a plan (JSON or YAML), or a whole POST /v1/plans body with a plan key")
    .description("run an agent plan, or preview what it compiles to")
    .option("--tools <list>", "the plan's allowlist, comma-separated (replaces the file's tools)")
    .addOption(new Option("--mode <mode>", "how it starts (default auto)").choices(["auto", "approval", "preview"]))
    .option("--approve-steps <list>", "high-risk steps approved ahead, comma-separated")
    .option("--input <json|file>", "the plan's inputs: a JSON object, or a file holding it")
    .option("--idempotency-key <key>", "start at most one run for this key")
    .option("--wait", "wait until the run ends, print its results; exit 1 unless it completed")
    .option("--follow", "show live progress until the run ends; exit 1 unless it completed")
    .action(act((io, file: string, options: PlanOptions) => planCommand(io, file, options)));
  command(cli.command("mcp").description("MCP servers"), "tools")
    .argument("<server>", "an mcp_servers id")
    .description("the server's tools, each with the pin an mcp action would check")
    .action(act((io, server: string) => mcpToolsCommand(io, server)));
}

/** Finding runs and watching them. */
function watching({ cli, command, act }: Builder): void {
  command(cli, "runs")
    .description("list runs, newest first")
    .option("--workflow <id>")
    .option("--status <status>")
    .option("--parent <run_id>")
    .option("--limit <n>")
    .option("--cursor <cursor>")
    .action(act((io, options: RunsOptions & { json?: boolean }) => runsCommand(io, options)));
  command(cli, "show")
    .argument("<run_id>")
    .description("a run: status, nodes, steps, gates, output")
    .option("--node <node>", "one node in full, with its step records")
    .action(act((io, runId: string, options: { node?: string }) => showCommand(io, runId, options.node)));
  command(cli, "tail")
    .argument("<run_id>")
    .description("the run's journal as it is written, until the run ends")
    .action(act((io, runId: string) => tailCommand(io, runId)));
  command(cli, "gates")
    .argument("<run_id>")
    .description("the run's gates and approvals")
    .action(act((io, runId: string) => gatesCommand(io, runId)));
  command(cli, "verify")
    .argument("<run_id|journal.json>")
    .argument("[jwks.json]", "saved keys (default: the server's)")
    .description("verify a journal's hash chain and signatures, offline")
    .action(act((io, target: string, jwks: string | undefined) => verifyCommand(io, target, jwks)));
}

/** Answering gates, sending events and the run controls. */
function controlling({ cli, command, act }: Builder): void {
  command(cli.command("events").description("external events"), "send")
    .argument("<name>", "the event name")
    .description("send an event: it resumes the runs waiting for its name that it matches")
    .option("--data <json|file>", "the event's data: JSON, or a file holding it")
    .option("--id <id>", "the event's id: the same id of the same name is accepted once in 24 h")
    .action(act((io, name: string, options: EventOptions) => sendEventCommand(io, name, options)));
  command(cli, "signal")
    .argument("<run_id>")
    .argument("<name>", "the signal's name")
    .description("send a signal to one run: its waiting event step takes it, or the run keeps it until one waits")
    .option("--data <json|file>", "the signal's data: JSON, or a file holding it")
    .option("--id <id>", "the signal's id: the run accepts the same id once")
    .action(act((io, runId: string, name: string, options: EventOptions) => signalCommand(io, runId, name, options)));
  command(cli, "answer", false)
    .argument("<run_id>")
    .argument("<gate_id>")
    .description("answer a gate")
    .requiredOption("--json <json|file>", "the answer, matching the gate's input_schema")
    .option("--responder <name>", "who answers")
    .action(
      act((io, runId: string, gateId: string, options: { json: string; responder?: string }) =>
        answerCommand(io, runId, gateId, options),
      ),
    );
  command(cli, "delete")
    .argument("<run_id>")
    .description("delete a run that has ended, now: only its index row (and an archived journal) stays (admin)")
    .action(act((io, runId: string) => deleteCommand(io, runId)));
  command(cli, "erase")
    .argument("<run_id>")
    .description("erase an ended run's inputs, outputs and answers (admin); its journal still verifies")
    .requiredOption("--reason <text>", "why (recorded in the journal's erased entry)")
    .action(act((io, runId: string, options: { reason: string }) => eraseCommand(io, runId, options.reason)));
  for (const control of CONTROLS) {
    command(cli, control)
      .argument("<run_id>")
      .description(`${control} a run`)
      .option("--reason <text>", "why (a cancel records it)")
      .action(
        act((io, runId: string, options: { reason?: string }) => controlCommand(io, control, runId, options.reason)),
      );
  }
}

/** Schedules: the list, and each one's controls. */
function scheduling({ cli, command, act }: Builder): void {
  command(cli, "schedules")
    .description("list schedules: paused or not, the next slot, what the latest slot did")
    .action(act((io) => schedulesCommand(io)));
  command(cli, "schedule")
    .argument("<id>", "a schedule id")
    .addArgument(new Argument("<action>").choices(SCHEDULE_ACTIONS))
    .description("pause or resume a schedule, start one run now (trigger), or one run per slot of a range (backfill)")
    .option("--from <time>", "backfill: the first time of the range (ISO 8601)")
    .option("--to <time>", "backfill: the last time of the range (ISO 8601, inclusive)")
    .addOption(
      new Option("--overlap <policy>", "backfill: the overlap policy for its slots (default the schedule's)").choices([
        "skip",
        "buffer_one",
        "allow_all",
        "cancel_other",
      ]),
    )
    .option("--wait", "trigger: wait until the run ends; exit 1 unless it completed")
    .option("--follow", "trigger: show live progress until the run ends; exit 1 unless it completed")
    .action(
      act((io, id: string, action: ScheduleAction, options: ScheduleOptions) =>
        scheduleCommand(io, id, action, options),
      ),
    );
}

/** Limits: every one with its status for the key "", or one limit's status for a key. */
function limiting({ cli, command, act }: Builder): void {
  const limits = command(cli, "limits")
    .description('list limits: budgets, slots in use, waiting, window used and when it resets (for the key "")')
    .action(act((io) => limitsCommand(io)));
  command(limits, "status")
    .argument("<id>", "a limit id")
    .description("one limit's status for a key: slots in use, waiting, each window, a pause")
    .option("--key <key>", 'the key (a value of the limit use\'s key expression; default "")')
    .action(act((io, id: string, options: { key?: string }) => limitStatusCommand(io, id, options.key)));
}

/** Tokens as data (admin only). */
function administering({ cli, command, act }: Builder): void {
  command(cli, "tokens")
    .addArgument(new Argument("<action>").choices(TOKEN_ACTIONS))
    .argument("[name-or-id]", "create: the token's name; revoke: its token id (tok_…)")
    .description("make a token with roles (its secret is printed once), list tokens, or revoke one")
    .option("--roles <roles>", "create: comma-separated roles (reader, runner, approver, author, admin)")
    .option("--workflows <patterns>", "create: comma-separated workflow ids it is limited to (* for any characters)")
    .option("--expires <time>", "create: when it expires (ISO 8601)")
    .action(
      act((io, action: TokenAction, argument: string | undefined, options: TokenOptions) =>
        tokensCommand(io, action, argument, options),
      ),
    );
}

/** Prints an error as the API gave it (code, message, each problem's path) and exits 1. */
function fail(thrown: unknown): never {
  if (thrown instanceof CliError) {
    process.stderr.write(`error: ${thrown.code}: ${thrown.message}\n`);
    for (const detail of thrown.details) {
      process.stderr.write(`  ${detail.path}: ${detail.message}\n`);
    }
  } else {
    process.stderr.write(`error: ${thrown instanceof Error ? thrown.message : String(thrown)}\n`);
  }
  process.exit(1);
}

if (import.meta.main) {
  program((code) => {
    process.exitCode = code;
  })
    .parseAsync()
    .catch(fail);
}
