/**
 * Plain types of the Trellis API's bodies: generated from the zod schemas in
 * schemas/ by `npm run schemas` (src/contracts/generate.ts); do not edit.
 * Import them from client/index.ts.
 */

/** Any JSON value. */
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

/** An action; its kind selects the implementation fields (docs/definitions.md#action). */
export type Action = {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "llm";
  implementation: LlmImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "mcp";
  implementation: McpImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "http";
  implementation: HttpImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "tool";
  implementation: ToolImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "shell";
  implementation: ShellImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "workflow";
  implementation: WorkflowImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "human";
  implementation: HumanImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "vector";
  implementation: VectorImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "metric";
  implementation: MetricImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "context";
  implementation: ContextImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "sleep";
  implementation: SleepImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "event";
  implementation: EventImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "plan";
  implementation: PlanImplementation;
};

/** Optional: approved_steps answers every matching open approval gate (step-02 matches step-02-*). */
export type ApproveBody = {
  approved_steps?: string[];
  reason?: string;
};

/** How many slots a backfill queued, and the first and last of them. */
export type BackfillAnswer = {
  slots: number;
  first: string | null;
  last: string | null;
};

/** A range of slots to start (from and to inclusive, at most 1,000 slots), and the overlap policy for them. */
export type BackfillBody = {
  from: string;
  to: string;
  overlap?: "skip" | "buffer_one" | "allow_all" | "cancel_other";
};

/** An optional reason for a cancel, recorded on the run. */
export type CancelBody = {
  reason?: string;
};

/** The implementation of an action of kind "context" (docs/definitions.md#implementation-per-kind). */
export type ContextImplementation = {
  updates: ({
    path: string;
    expr: string;
  })[];
};

/** The token made, with its secret: shown this once, stored only as a keyed hash. */
export type CreatedToken = {
  token_id: string;
  name: string;
  roles: ("reader" | "runner" | "approver" | "author" | "admin")[];
  workflows: string[] | null;
  expires_at: string | null;
  token: string;
};

/** A token to make: its name, roles (reader, runner, approver, author, admin), the workflows it is limited to (id patterns, * for any characters), and when it expires. */
export type CreateTokenBody = {
  name: string;
  roles: ("reader" | "runner" | "approver" | "author" | "admin")[];
  workflows?: string[] | null;
  expires_at?: string | null;
};

/** Definitions to register, by kind (docs/definitions.md). */
export type DefinitionBundle = {
  workflows?: Workflow[];
  tasks?: Task[];
  actions?: Action[];
  prompts?: Prompt[];
  models?: Model[];
  mcp_servers?: McpServer[];
  schedules?: ({
    id: string;
    description?: string;
    workflow: Reference;
    cron: string;
    timezone?: string;
    input?: JsonValue;
    overlap?: "skip" | "buffer_one" | "allow_all" | "cancel_other";
    catchup_window_ms?: number;
    jitter_ms?: number;
    start_at?: string;
    end_at?: string;
  })[];
  webhooks?: Webhook[];
  limits?: ({
    id: string;
    description?: string;
    concurrency?: number;
    rate?: {
      limit: number;
      period_ms: number;
    };
    tokens?: {
      limit: number;
      period_ms: number;
    };
  })[];
};

/** The latest version of each definition of a kind, newest first, and the next page's cursor. */
export type DefinitionList = {
  definitions: ({
    kind: "workflows" | "tasks" | "actions" | "prompts" | "models" | "mcp_servers" | "schedules" | "webhooks" | "limits";
    id: string;
    version: number;
    created_at: string;
    description?: string;
  })[];
  next_cursor: string | null;
};

/** A stored definition: its kind, id, version, and content (keys sorted). */
export type DefinitionRecord = {
  kind: "workflows" | "tasks" | "actions" | "prompts" | "models" | "mcp_servers" | "schedules" | "webhooks" | "limits";
  id: string;
  version: number;
  created_at: string;
  definition: {
    [key: string]: JsonValue;
  };
};

/** Every version of one definition, highest first, and the next page's cursor. */
export type DefinitionVersions = {
  versions: ({
    kind: "workflows" | "tasks" | "actions" | "prompts" | "models" | "mcp_servers" | "schedules" | "webhooks" | "limits";
    id: string;
    version: number;
    created_at: string;
    description?: string;
  })[];
  next_cursor: string | null;
};

/** A run deleted: when, why, the status it ended with, and whether its journal was archived. */
export type DeletedRun = {
  run_id: string;
  status: "deleted";
  ended: "drafting" | "queued" | "running" | "waiting" | "paused" | "completed" | "failed" | "cancelled";
  deleted_at: string;
  reason: "retention" | "operator";
  archived: boolean;
  erased?: {
    at: string;
    by?: {
      token_id: string;
      name: string;
    } | {
      email: string;
    } | {
      link: string;
      approver: string;
    };
    reason: string;
    seqs: number[];
    blobs: string[];
  };
};

/** Why the run is erased (required, at most 1,000 characters), recorded in its journal's erased entry. */
export type EraseBody = {
  reason: string;
};

/** The run erased (a run view with erased), or a deleted run whose archived journal was erased (with erased). */
export type ErasedRun = RunView | DeletedRun;

/** The body of every error: a dotted code, a message, and the problems with their paths. */
export type ErrorBody = {
  error: {
    code: string;
    message: string;
    details?: ({
      path: string;
      message: string;
      code?: string;
    })[];
  };
};

/** The implementation of an action of kind "event" (docs/definitions.md#implementation-per-kind). */
export type EventImplementation = {
  name: string | string[];
  match?: string;
  timeout_ms?: number;
  lookback_ms?: number;
  on_timeout?: "fail" | {
    default: JsonValue;
  };
};

/** What an event's triggers did: matched (false until its triggers are read), and each start: pending, started with its run_id, or failed with the error. */
export type EventTriggers = {
  matched: boolean;
  starts: ({
    workflow: string;
    version: number;
    status: "pending" | "started" | "failed";
    attempts: number;
    run_id?: string;
    error?: string;
  })[];
};

/** The answer to a gate: a response matching its input_schema, and who responded. */
export type GateAnswerBody = {
  response: JsonValue;
  responder?: string;
};

/** An approval link: its URL (the secret is in it, shown once), its id and when it expires. */
export type GateLinkAnswer = {
  url: string;
  link_id: string;
  expires_at: string;
};

/** An approval link's approver (an email, or a name) and how long it lasts. */
export type GateLinkBody = {
  approver: string;
  expires_in_ms?: number;
};

/** Every gate of a run. */
export type GateList = {
  gates: GateView[];
};

/** A human gate: an input or an approval, with its status and answer. */
export type GateView = {
  gate_id: string;
  kind: "input" | "approval";
  node: string;
  item: number | null;
  step: string;
  prompt: string;
  input_schema: boolean | {
    [key: string]: JsonValue;
  };
  status: "open" | "answered" | "expired";
  opened_at: string;
  expires_at: string | null;
  response?: JsonValue;
  responder?: string | null;
  answered_by?: {
    token_id: string;
    name: string;
  } | {
    email: string;
  } | {
    link: string;
    approver: string;
  };
  responded_at?: string | null;
  reason?: string;
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
};

/** The Worker is up. */
export type Health = {
  ok: true;
};

/** The implementation of an action of kind "http" (docs/definitions.md#implementation-per-kind). */
export type HttpImplementation = {
  method: "GET" | "HEAD" | "POST" | "PUT" | "PATCH" | "DELETE" | "OPTIONS";
  url_template: string;
  headers?: {
    [key: string]: string;
  };
  body_template?: string;
  body?: JsonValue;
  response?: "json" | "text";
  idempotency?: boolean;
};

/** The implementation of an action of kind "human" (docs/definitions.md#implementation-per-kind). */
export type HumanImplementation = {
  prompt_template: string;
  input_schema: JsonSchema;
  timeout_ms?: number;
  on_timeout?: "fail" | {
    default: JsonValue;
  };
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
};

/** An action written inline in a step; its id is optional. */
export type InlineAction = {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "llm";
  implementation: LlmImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "mcp";
  implementation: McpImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "http";
  implementation: HttpImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "tool";
  implementation: ToolImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "shell";
  implementation: ShellImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "workflow";
  implementation: WorkflowImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "human";
  implementation: HumanImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "vector";
  implementation: VectorImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "metric";
  implementation: MetricImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "context";
  implementation: ContextImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "sleep";
  implementation: SleepImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "event";
  implementation: EventImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  undo?: Undo;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "plan";
  implementation: PlanImplementation;
};

/** A task written inline in a node; its id is optional. */
export type InlineTask = {
  id?: string;
  description?: string;
  input_schema?: JsonSchema;
  output_schema?: JsonSchema;
  steps: Step[];
};

/** An undo's action written inline: an action without an undo of its own. */
export type InlineUndoAction = {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "llm";
  implementation: {
    prompt: Reference | {
      id?: string;
      description?: string;
      messages: ({
        role: "system" | "user" | "assistant";
        template: string;
      })[];
      produces?: JsonSchema;
    };
    model: Reference | {
      id?: string;
      description?: string;
      provider: "openai" | "anthropic" | "workers-ai" | "openai-compatible";
      model_id: string;
      base_url?: string;
      api_key?: string;
      parameters?: {
        [key: string]: JsonValue;
      };
      pricing?: {
        input_per_mtok: number;
        output_per_mtok: number;
      };
      limits?: ({
        limit: Reference;
        key?: string;
      })[];
    };
    repair?: number;
    fallback_models?: (Reference | {
      id?: string;
      description?: string;
      provider: "openai" | "anthropic" | "workers-ai" | "openai-compatible";
      model_id: string;
      base_url?: string;
      api_key?: string;
      parameters?: {
        [key: string]: JsonValue;
      };
      pricing?: {
        input_per_mtok: number;
        output_per_mtok: number;
      };
      limits?: ({
        limit: Reference;
        key?: string;
      })[];
    })[];
  };
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "mcp";
  implementation: McpImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "http";
  implementation: HttpImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "tool";
  implementation: ToolImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "shell";
  implementation: ShellImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "workflow";
  implementation: WorkflowImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "human";
  implementation: HumanImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "vector";
  implementation: VectorImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "metric";
  implementation: MetricImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "context";
  implementation: ContextImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "sleep";
  implementation: SleepImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "event";
  implementation: EventImplementation;
} | {
  description?: string;
  requires?: JsonSchema;
  produces?: JsonSchema;
  execution?: {
    timeout_ms?: number;
    retry_policy?: RetryPolicy;
  };
  risk?: "low" | "medium" | "high";
  approvers?: {
    roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
    tokens?: string[];
    emails?: string[];
  };
  id?: string;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  kind: "plan";
  implementation: PlanImplementation;
};

/** { "<field>": <source> }: a "$…" JSONPath, { "expr" }, { "template" }, { "path", "default" | "optional" }, { "concat" } or a literal. */
export type InputMapping = {
  [key: string]: JsonValue;
};

/** One signed journal entry (docs/journal.md). */
export type JournalEntry = {
  seq: number;
  run_id: string;
  kind: string;
  at: string;
  body: {
    [key: string]: JsonValue;
  };
  prev: string | null;
  hash: string;
  sig: string;
  kid: string;
};

/** A run's signed journal, in seq order. */
export type JournalResponse = {
  entries: JournalEntry[];
};

/** A JSON document: the generated JSON Schema or OpenAPI document. */
export type JsonDocument = {
  [key: string]: unknown;
};

/** A JSON Schema (draft 2020-12), checked at registration. */
export type JsonSchema = boolean | {
  [key: string]: JsonValue;
};

/** any JSON value */
export type JsonValue = Json;

/** The journal's public keys as a JWKS (current and retired). */
export type Jwks = {
  keys: ({
    kty: "OKP";
    crv: "Ed25519";
    x: string;
    kid: string;
    alg: "EdDSA";
    use: "sig";
    [key: string]: unknown;
  })[];
};

/** One key of a limit: slots in use, holders waiting, the tokens (else rate) window's use and when it next frees room, the rate window too when it has both, and until when a Retry-After pauses it. */
export type LimitStatus = {
  limit: string;
  key: string;
  in_use: number;
  waiting: number;
  window: {
    used: number;
    resets_at: string | null;
  };
  rate_window?: {
    used: number;
    resets_at: string | null;
  };
  paused_until: string | null;
};

/** The implementation of an action of kind "llm" (docs/definitions.md#implementation-per-kind). */
export type LlmImplementation = {
  prompt: Reference | {
    id?: string;
    description?: string;
    messages: ({
      role: "system" | "user" | "assistant";
      template: string;
    })[];
    produces?: JsonSchema;
  };
  model: Reference | {
    id?: string;
    description?: string;
    provider: "openai" | "anthropic" | "workers-ai" | "openai-compatible";
    model_id: string;
    base_url?: string;
    api_key?: string;
    parameters?: {
      [key: string]: JsonValue;
    };
    pricing?: {
      input_per_mtok: number;
      output_per_mtok: number;
    };
    limits?: ({
      limit: Reference;
      key?: string;
    })[];
  };
  repair?: number;
  fallback_models?: (Reference | {
    id?: string;
    description?: string;
    provider: "openai" | "anthropic" | "workers-ai" | "openai-compatible";
    model_id: string;
    base_url?: string;
    api_key?: string;
    parameters?: {
      [key: string]: JsonValue;
    };
    pricing?: {
      input_per_mtok: number;
      output_per_mtok: number;
    };
    limits?: ({
      limit: Reference;
      key?: string;
    })[];
  })[];
  tools?: (Reference | string | {
    action: Reference | string | {
      description?: string;
      requires?: JsonSchema;
      produces?: JsonSchema;
      execution?: {
        timeout_ms?: number;
        retry_policy?: RetryPolicy;
      };
      risk?: "low" | "medium" | "high";
      approvers?: {
        roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
        tokens?: string[];
        emails?: string[];
      };
      id?: string;
      undo?: Undo;
      limits?: ({
        limit: Reference;
        key?: string;
      })[];
      kind: "llm";
      implementation: {
        prompt: Reference | {
          id?: string;
          description?: string;
          messages: ({
            role: "system" | "user" | "assistant";
            template: string;
          })[];
          produces?: JsonSchema;
        };
        model: Reference | {
          id?: string;
          description?: string;
          provider: "openai" | "anthropic" | "workers-ai" | "openai-compatible";
          model_id: string;
          base_url?: string;
          api_key?: string;
          parameters?: {
            [key: string]: JsonValue;
          };
          pricing?: {
            input_per_mtok: number;
            output_per_mtok: number;
          };
          limits?: ({
            limit: Reference;
            key?: string;
          })[];
        };
        repair?: number;
        fallback_models?: (Reference | {
          id?: string;
          description?: string;
          provider: "openai" | "anthropic" | "workers-ai" | "openai-compatible";
          model_id: string;
          base_url?: string;
          api_key?: string;
          parameters?: {
            [key: string]: JsonValue;
          };
          pricing?: {
            input_per_mtok: number;
            output_per_mtok: number;
          };
          limits?: ({
            limit: Reference;
            key?: string;
          })[];
        })[];
      };
    } | {
      description?: string;
      requires?: JsonSchema;
      produces?: JsonSchema;
      execution?: {
        timeout_ms?: number;
        retry_policy?: RetryPolicy;
      };
      risk?: "low" | "medium" | "high";
      approvers?: {
        roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
        tokens?: string[];
        emails?: string[];
      };
      id?: string;
      undo?: Undo;
      limits?: ({
        limit: Reference;
        key?: string;
      })[];
      kind: "mcp";
      implementation: McpImplementation;
    } | {
      description?: string;
      requires?: JsonSchema;
      produces?: JsonSchema;
      execution?: {
        timeout_ms?: number;
        retry_policy?: RetryPolicy;
      };
      risk?: "low" | "medium" | "high";
      approvers?: {
        roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
        tokens?: string[];
        emails?: string[];
      };
      id?: string;
      undo?: Undo;
      limits?: ({
        limit: Reference;
        key?: string;
      })[];
      kind: "http";
      implementation: HttpImplementation;
    } | {
      description?: string;
      requires?: JsonSchema;
      produces?: JsonSchema;
      execution?: {
        timeout_ms?: number;
        retry_policy?: RetryPolicy;
      };
      risk?: "low" | "medium" | "high";
      approvers?: {
        roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
        tokens?: string[];
        emails?: string[];
      };
      id?: string;
      undo?: Undo;
      limits?: ({
        limit: Reference;
        key?: string;
      })[];
      kind: "tool";
      implementation: ToolImplementation;
    } | {
      description?: string;
      requires?: JsonSchema;
      produces?: JsonSchema;
      execution?: {
        timeout_ms?: number;
        retry_policy?: RetryPolicy;
      };
      risk?: "low" | "medium" | "high";
      approvers?: {
        roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
        tokens?: string[];
        emails?: string[];
      };
      id?: string;
      undo?: Undo;
      limits?: ({
        limit: Reference;
        key?: string;
      })[];
      kind: "shell";
      implementation: ShellImplementation;
    } | {
      description?: string;
      requires?: JsonSchema;
      produces?: JsonSchema;
      execution?: {
        timeout_ms?: number;
        retry_policy?: RetryPolicy;
      };
      risk?: "low" | "medium" | "high";
      approvers?: {
        roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
        tokens?: string[];
        emails?: string[];
      };
      id?: string;
      undo?: Undo;
      limits?: ({
        limit: Reference;
        key?: string;
      })[];
      kind: "workflow";
      implementation: WorkflowImplementation;
    } | {
      description?: string;
      requires?: JsonSchema;
      produces?: JsonSchema;
      execution?: {
        timeout_ms?: number;
        retry_policy?: RetryPolicy;
      };
      risk?: "low" | "medium" | "high";
      approvers?: {
        roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
        tokens?: string[];
        emails?: string[];
      };
      id?: string;
      undo?: Undo;
      limits?: ({
        limit: Reference;
        key?: string;
      })[];
      kind: "human";
      implementation: HumanImplementation;
    } | {
      description?: string;
      requires?: JsonSchema;
      produces?: JsonSchema;
      execution?: {
        timeout_ms?: number;
        retry_policy?: RetryPolicy;
      };
      risk?: "low" | "medium" | "high";
      approvers?: {
        roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
        tokens?: string[];
        emails?: string[];
      };
      id?: string;
      undo?: Undo;
      limits?: ({
        limit: Reference;
        key?: string;
      })[];
      kind: "vector";
      implementation: VectorImplementation;
    } | {
      description?: string;
      requires?: JsonSchema;
      produces?: JsonSchema;
      execution?: {
        timeout_ms?: number;
        retry_policy?: RetryPolicy;
      };
      risk?: "low" | "medium" | "high";
      approvers?: {
        roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
        tokens?: string[];
        emails?: string[];
      };
      id?: string;
      undo?: Undo;
      limits?: ({
        limit: Reference;
        key?: string;
      })[];
      kind: "metric";
      implementation: MetricImplementation;
    } | {
      description?: string;
      requires?: JsonSchema;
      produces?: JsonSchema;
      execution?: {
        timeout_ms?: number;
        retry_policy?: RetryPolicy;
      };
      risk?: "low" | "medium" | "high";
      approvers?: {
        roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
        tokens?: string[];
        emails?: string[];
      };
      id?: string;
      undo?: Undo;
      limits?: ({
        limit: Reference;
        key?: string;
      })[];
      kind: "context";
      implementation: ContextImplementation;
    } | {
      description?: string;
      requires?: JsonSchema;
      produces?: JsonSchema;
      execution?: {
        timeout_ms?: number;
        retry_policy?: RetryPolicy;
      };
      risk?: "low" | "medium" | "high";
      approvers?: {
        roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
        tokens?: string[];
        emails?: string[];
      };
      id?: string;
      undo?: Undo;
      limits?: ({
        limit: Reference;
        key?: string;
      })[];
      kind: "sleep";
      implementation: SleepImplementation;
    } | {
      description?: string;
      requires?: JsonSchema;
      produces?: JsonSchema;
      execution?: {
        timeout_ms?: number;
        retry_policy?: RetryPolicy;
      };
      risk?: "low" | "medium" | "high";
      approvers?: {
        roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
        tokens?: string[];
        emails?: string[];
      };
      id?: string;
      undo?: Undo;
      limits?: ({
        limit: Reference;
        key?: string;
      })[];
      kind: "event";
      implementation: EventImplementation;
    } | {
      description?: string;
      requires?: JsonSchema;
      produces?: JsonSchema;
      execution?: {
        timeout_ms?: number;
        retry_policy?: RetryPolicy;
      };
      risk?: "low" | "medium" | "high";
      approvers?: {
        roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
        tokens?: string[];
        emails?: string[];
      };
      id?: string;
      undo?: Undo;
      limits?: ({
        limit: Reference;
        key?: string;
      })[];
      kind: "plan";
      implementation: PlanImplementation;
    };
    name?: string;
    description?: string;
    pin?: string;
  })[];
  max_turns?: number;
  budget?: {
    tokens?: number;
    cost_usd?: number;
  };
  parallel_tool_calls?: boolean;
};

/** The implementation of an action of kind "mcp" (docs/definitions.md#implementation-per-kind). */
export type McpImplementation = {
  server: Reference;
  tool: string;
  pin?: string;
};

/** A JSON-RPC 2.0 message of the Model Context Protocol, or a batch of them (docs/mcp.md). */
export type McpMessage = {
  jsonrpc: "2.0";
  id?: string | number;
  method?: string;
  params?: {
    [key: string]: unknown;
  };
  result?: {
    [key: string]: unknown;
  };
  error?: {
    code: number;
    message: string;
    [key: string]: unknown;
  };
  [key: string]: unknown;
} | ({
  jsonrpc: "2.0";
  id?: string | number;
  method?: string;
  params?: {
    [key: string]: unknown;
  };
  result?: {
    [key: string]: unknown;
  };
  error?: {
    code: number;
    message: string;
    [key: string]: unknown;
  };
  [key: string]: unknown;
})[];

/** An MCP server: url, headers (credentials written $env:NAME), allowed_tools. */
export type McpServer = {
  id: string;
  description?: string;
  url: string;
  headers?: {
    [key: string]: string;
  };
  allowed_tools?: string[];
};

/** An MCP server's tools now, each with the pin an mcp action checks and whether allowed_tools lets it through. */
export type McpToolList = {
  server: {
    id: string;
    version: number;
  };
  tools: ({
    name: string;
    description: string | null;
    pin: string;
    allowed: boolean;
  })[];
};

/** The implementation of an action of kind "metric" (docs/definitions.md#implementation-per-kind). */
export type MetricImplementation = {
  metric_name: string;
  value: number | {
    expr: string;
  };
  dimensions?: {
    [key: string]: JsonValue;
  };
};

/** A model: provider, model_id, and credentials written $env:NAME. */
export type Model = {
  id: string;
  description?: string;
  provider: "openai" | "anthropic" | "workers-ai" | "openai-compatible";
  model_id: string;
  base_url?: string;
  api_key?: string;
  parameters?: {
    [key: string]: JsonValue;
  };
  pricing?: {
    input_per_mtok: number;
    output_per_mtok: number;
  };
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
};

/** A node: runs exactly one of "task" or "workflow" (docs/definitions.md#node). */
export type Node = {
  description?: string;
  task?: Reference | InlineTask;
  workflow?: Reference | WorkflowChoice;
  depends_on?: string[];
  when?: string;
  foreach?: {
    items: string;
    max_parallel?: number;
  };
  repeat?: {
    until: string;
    max_iterations: number;
  };
  input_mapping?: InputMapping;
  output_mapping?: OutputMapping;
  resource_bindings?: {
    [key: string]: string;
  };
  retry?: RetryPolicy;
  timeout_ms?: number;
  on_failure?: "fail" | "continue";
};

/** One node of a run in full: each invocation with its dispatches' step records. */
export type NodeDetail = {
  status: "pending" | "running" | "waiting" | "completed" | "failed" | "skipped" | "cancelled";
  attempts: number;
  started_at: string | null;
  finished_at: string | null;
  error?: {
    code: string;
    message: string;
    node?: string;
    step?: string;
    retryable?: boolean;
  };
  items?: {
    total: number;
    pending: number;
    running: number;
    completed: number;
    failed: number;
    skipped: number;
    cancelled: number;
  };
  invocations: ({
    index: number;
    status: "pending" | "running" | "retrying" | "suspended" | "completed" | "failed" | "cancelled" | "skipped";
    attempts: number;
    input: JsonValue | null;
    output: JsonValue | null;
    error: {
      code: string;
      message: string;
      node?: string;
      step?: string;
      retryable?: boolean;
    } | null;
    dispatches: ({
      seq: number;
      kind: "task.completed" | "task.failed" | "task.suspended";
      attempt: number;
      steps: ({
        step: string;
        action: string;
        status: "completed" | "skipped" | "failed" | "continued" | "suspended";
        duration_ms: number;
        attempts: ({
          attempt: number;
          duration_ms: number;
          error?: {
            code: string;
            message: string;
            retryable: boolean;
            retry_after_ms?: number;
          };
          retry_in_ms?: number;
          retry_reason?: "backoff" | "retry_after" | "fallback" | "repair";
          call?: {
            [key: string]: JsonValue;
          };
        })[];
        error?: {
          code: string;
          message: string;
          retryable: boolean;
          retry_after_ms?: number;
        };
        else?: "skip" | "succeed";
        undo?: {
          action: string;
          input: JsonValue;
        } | {
          action: string;
          error: {
            code: string;
            message: string;
          };
        };
      })[];
    })[];
    waiting_for?: {
      kind: "gate";
      gate_id: string;
    } | {
      kind: "child";
      run_id: string | null;
      workflow: string;
    } | {
      kind: "timer";
      until: string;
    } | {
      kind: "event";
      names: string[];
      match?: string;
      expires_at: string | null;
    } | {
      kind: "tools";
      turn: number;
      calls: ({
        name: string;
        status: "approval" | "pending" | "running" | "completed" | "failed";
      })[];
    } | {
      kind: "limit";
      limit: string;
      key: string;
      since: string;
    };
    agent?: {
      step: string;
      turns: ({
        turn: number;
        model: string;
        provider: string;
        tokens: {
          input: number;
          output: number;
        };
        cost_usd: number;
        finish_reason: string;
        repair?: true;
        answer?: JsonValue;
      })[];
      tool_calls: ({
        turn: number;
        index: number;
        name: string;
        call: string;
        input: JsonValue;
        status: "requested" | "approval" | "running" | "completed" | "failed" | "cancelled";
        gate_id?: string;
        attempts: number;
        output?: JsonValue;
        error?: {
          code: string;
          message: string;
        };
        duration_ms?: number;
      })[];
      tool_calls_total: number;
      usage: {
        tokens: {
          input: number;
          output: number;
        };
        cost_usd: number;
      };
      budget?: {
        tokens?: number;
        cost_usd?: number;
      };
      max_turns: number;
    };
  })[];
  node: string;
  iterations: number;
  children: ({
    run_id: string;
    item: number | null;
    step: string | null;
    workflow: string;
    status: "completed" | "failed" | "cancelled" | null;
  })[];
};

/** Open gates across runs, newest run first, each with its run, and the cursor of the next page. */
export type OpenGateList = {
  gates: ({
    gate_id: string;
    kind: "input" | "approval";
    node: string;
    item: number | null;
    step: string;
    prompt: string;
    input_schema: boolean | {
      [key: string]: JsonValue;
    };
    status: "open" | "answered" | "expired";
    opened_at: string;
    expires_at: string | null;
    response?: JsonValue;
    responder?: string | null;
    answered_by?: {
      token_id: string;
      name: string;
    } | {
      email: string;
    } | {
      link: string;
      approver: string;
    };
    responded_at?: string | null;
    reason?: string;
    approvers?: {
      roles?: ("reader" | "runner" | "approver" | "author" | "admin")[];
      tokens?: string[];
      emails?: string[];
    };
    run_id: string;
    workflow: {
      id: string;
      version: number;
    };
    run_status: "drafting" | "queued" | "running" | "waiting" | "paused" | "completed" | "failed" | "cancelled";
  })[];
  next_cursor: string | null;
};

/** { "state.…" | "output.…": <source> }: writes the callee's output. */
export type OutputMapping = {
  [key: string]: JsonValue;
};

/** The implementation of an action of kind "plan" (docs/definitions.md#implementation-per-kind). */
export type PlanImplementation = {
  tools: string[];
  approved_steps?: string[];
  mode?: "auto" | "approval";
};

/** An agent plan in either notation, its tools allowlist, input, mode, pre-approved steps (docs/plans.md). */
export type PlanRequest = {
  plan: {
    [key: string]: JsonValue;
  };
  tools: string[];
  input?: {
    [key: string]: JsonValue;
  };
  mode?: "auto" | "approval" | "preview";
  approved_steps?: string[];
  idempotency_key?: string;
  priority?: number;
};

/** A prompt: messages rendered with Handlebars over the action input. */
export type Prompt = {
  id: string;
  description?: string;
  messages: ({
    role: "system" | "user" | "assistant";
    template: string;
  })[];
  produces?: JsonSchema;
};

/** A reference: "id" (latest at run start) or "id@3" (pinned). */
export type Reference = string;

/** What a registration created or reused (existing: true), with versions. */
export type RegisterResponse = {
  created: ({
    kind: "workflows" | "tasks" | "actions" | "prompts" | "models" | "mcp_servers" | "schedules" | "webhooks" | "limits";
    id: string;
    version: number;
    existing: boolean;
  })[];
  warnings?: ({
    path: string;
    message: string;
    code?: string;
  })[];
};

/** Exponential backoff; max_delay_ms must not be less than initial_delay_ms. */
export type RetryPolicy = {
  max_attempts?: number;
  initial_delay_ms?: number;
  backoff_coefficient?: number;
  max_delay_ms?: number;
  jitter?: boolean;
};

/** The token revoked: refused everywhere within 10 seconds. */
export type RevokedToken = {
  token_id: string;
  revoked: true;
};

/** A page of runs from the run index, newest first, and the cursor of the next page (null at the end). */
export type RunList = {
  runs: ({
    run_id: string;
    workflow: {
      id: string;
      version: number;
    };
    status: "drafting" | "queued" | "running" | "waiting" | "paused" | "completed" | "failed" | "cancelled" | "deleted";
    mode: "auto" | "approval" | "preview";
    parent: string | null;
    created_by: string;
    trigger: "api" | "plan" | "parent" | "schedule" | "event" | "webhook";
    created_at: string;
    updated_at: string;
    finished_at: string | null;
    deleted_at: string | null;
    error: {
      code: string;
      message: string;
    } | null;
  })[];
  next_cursor: string | null;
};

/** A run: status, input, output, error, nodes, gates, usage, parent and children. */
export type RunView = {
  run_id: string;
  workflow: {
    id: string;
    version: number;
  };
  status: "drafting" | "queued" | "running" | "waiting" | "paused" | "completed" | "failed" | "cancelled";
  mode: "auto" | "approval" | "preview";
  input: JsonValue;
  output: JsonValue | null;
  error: {
    code: string;
    message: string;
    node?: string;
    step?: string;
    retryable?: boolean;
  } | null;
  created_at: string;
  updated_at: string;
  start_at: string | null;
  nodes: {
    [key: string]: {
      status: "pending" | "running" | "waiting" | "completed" | "failed" | "skipped" | "cancelled";
      attempts: number;
      started_at: string | null;
      finished_at: string | null;
      error?: {
        code: string;
        message: string;
        node?: string;
        step?: string;
        retryable?: boolean;
      };
      items?: {
        total: number;
        pending: number;
        running: number;
        completed: number;
        failed: number;
        skipped: number;
        cancelled: number;
      };
      invocations: ({
        index: number;
        status: "pending" | "running" | "retrying" | "suspended" | "completed" | "failed" | "cancelled" | "skipped";
        attempts: number;
        steps: ({
          step: string;
          status: "completed" | "skipped" | "failed" | "continued" | "suspended";
          attempts: number;
          duration_ms: number;
          error?: string;
          tokens?: {
            input: number;
            output: number;
          };
          cost_usd?: number;
        })[];
        waiting_for?: {
          kind: "gate";
          gate_id: string;
        } | {
          kind: "child";
          run_id: string | null;
          workflow: string;
        } | {
          kind: "timer";
          until: string;
        } | {
          kind: "event";
          names: string[];
          match?: string;
          expires_at: string | null;
        } | {
          kind: "tools";
          turn: number;
          calls: ({
            name: string;
            status: "approval" | "pending" | "running" | "completed" | "failed";
          })[];
        } | {
          kind: "limit";
          limit: string;
          key: string;
          since: string;
        };
      })[];
    };
  };
  gates: GateView[];
  waiting_for: ({
    kind: "gate";
    gate_id: string;
    node: string;
    item: number | null;
    step: string | null;
  } | {
    kind: "child";
    run_id: string | null;
    workflow: string;
    node: string;
    item: number | null;
    step: string | null;
  } | {
    kind: "timer";
    until: string;
    node: string;
    item: number | null;
    step: string | null;
  } | {
    kind: "event";
    names: string[];
    match?: string;
    expires_at: string | null;
    node: string;
    item: number | null;
    step: string | null;
  } | {
    kind: "tools";
    turn: number;
    calls: ({
      name: string;
      status: "approval" | "pending" | "running" | "completed" | "failed";
    })[];
    node: string;
    item: number | null;
    step: string | null;
  } | {
    kind: "limit";
    limit: string;
    key: string;
    since: string;
    node: string;
    item: number | null;
    step: string | null;
  })[];
  usage: {
    input_tokens: number;
    output_tokens: number;
    cost_usd: number;
  };
  trigger: {
    kind: "api";
  } | {
    kind: "plan";
  } | {
    kind: "parent";
    run_id: string;
    key: string;
  } | {
    kind: "schedule";
    schedule: string;
    version: number;
    scheduled_at: string;
  } | {
    kind: "event";
    event_id: string;
    name: string;
  } | {
    kind: "webhook";
    webhook: string;
    event_id: string;
    name: string;
  };
  priority: number;
  limits?: ({
    limit: string;
    key: string;
    status: "waiting" | "held";
    since: string;
  })[];
  parent: {
    run_id: string;
    node: string;
    step: string | null;
  } | null;
  children: ({
    run_id: string;
    step: string | null;
    workflow: string;
    status: "completed" | "failed" | "cancelled" | null;
    node: string;
    item: number | null;
  })[];
  compensation?: {
    status: "none" | "running" | "completed" | "failed";
    trigger: "on_failure" | "on_cancel" | "manual" | "redrive" | null;
    started_at: string | null;
    finished_at: string | null;
    undos: ({
      node: string;
      item: number | null;
      step: string;
      action: string;
      status: "enqueued" | "running" | "retrying" | "completed" | "failed";
      attempts: number;
      error: {
        code: string;
        message: string;
        node?: string;
        step?: string;
        retryable?: boolean;
      } | null;
    })[];
  };
  results?: ({
    step: string;
    success: boolean;
    tool: string;
    data: JsonValue;
    error?: {
      code: string;
      message: string;
    };
    metadata: {
      executionTime: number;
      timestamp: string | null;
      retries: number;
    };
  })[];
  controls: ("cancel" | "pause" | "resume" | "redrive" | "compensate" | "approve")[];
  erased?: {
    at: string;
    by?: {
      token_id: string;
      name: string;
    } | {
      email: string;
    } | {
      link: string;
      approver: string;
    };
    reason: string;
    seqs: number[];
    blobs: string[];
  };
};

/** A schedule: whether it is paused, its next 5 slots, and what became of its recent slots. */
export type ScheduleStatus = {
  id: string;
  version: number;
  paused: boolean;
  next: string[];
  recent: SlotRecord[];
};

/** One event { name, data?, id? }, or { events: [...] } with up to 100 of them. */
export type SendEventsBody = {
  name: string;
  data?: JsonValue;
  id?: string;
} | {
  events: ({
    name: string;
    data?: JsonValue;
    id?: string;
  })[];
};

/** Each event sent, in order: its id (the one given, or a generated evt_…), and whether it was a duplicate. */
export type SendEventsResponse = {
  events: ({
    event_id: string;
    duplicate: boolean;
  })[];
};

/** The implementation of an action of kind "shell" (docs/definitions.md#implementation-per-kind). */
export type ShellImplementation = {
  command_template: string;
  working_dir?: string;
  resource_name?: string;
  env?: {
    [key: string]: string;
  };
  allow_nonzero_exit?: boolean;
  ok_exit_codes?: number[];
  timeout_ms?: number;
  max_output_bytes?: number;
};

/** The implementation of an action of kind "sleep" (docs/definitions.md#implementation-per-kind). */
export type SleepImplementation = {
  duration_ms?: number;
  until?: string | number;
};

/** One slot of a schedule: its time, its run (null when none started) and the run's status, or skipped/buffered/start_failed with a reason. */
export type SlotRecord = {
  scheduled_at: string;
  run_id: string | null;
  status: string;
  reason?: string;
  source: "cron" | "trigger" | "backfill" | "buffer";
};

/** A started plan run (or a preview: run_id null), with the graph the plan compiled to. */
export type StartPlanResponse = {
  run_id: string | null;
  status: string;
  workflow: {
    id: string;
    version: number;
  };
  graph: {
    notation: "dependency" | "placeholder";
    layers: string[][];
    steps: ({
      id: string;
      tool: string;
      depends_on: string[];
      risk: "low" | "medium" | "high";
      expands_over: string | null;
      args: {
        [key: string]: JsonValue;
      };
    })[];
    expansions: ({
      step: string;
      over: string;
      implicit: boolean;
    })[];
    high_risk: string[];
    inputs_gate: boolean;
    fallback: string | null;
    config: {
      maxParallelExecutions: number;
      toolTimeout: number;
      maxRetries: number;
      retryDelay: number;
      failFast: boolean;
    };
    approvals: {
      preapproval_allowed: boolean;
      approved_steps: string[];
    };
  };
  output?: JsonValue | null;
  error?: {
    code: string;
    message: string;
    node?: string;
    step?: string;
    retryable?: boolean;
  } | null;
};

/** How to start a run: its input, a pinned version, an idempotency key, a mode. */
export type StartRunBody = {
  input?: JsonValue;
  version?: number;
  idempotency_key?: string;
  mode?: "auto" | "approval" | "preview";
  start_at?: string;
  delay_ms?: number;
  priority?: number;
};

/** A started run (or, for a preview, run_id null, status "preview" and the plan). */
export type StartRunResponse = {
  run_id: string | null;
  status: "drafting" | "queued" | "running" | "waiting" | "paused" | "completed" | "failed" | "cancelled" | "preview";
  workflow: {
    id: string;
    version: number;
  };
  plan?: {
    [key: string]: JsonValue;
  };
  output?: JsonValue | null;
  error?: {
    code: string;
    message: string;
    node?: string;
    step?: string;
    retryable?: boolean;
  } | null;
};

/** A step: calls one action (docs/definitions.md#step). */
export type Step = {
  ref: string;
  description?: string;
  action: Reference | InlineAction;
  input_mapping?: InputMapping;
  output_mapping?: OutputMapping;
  condition?: {
    if: string;
    else?: "skip" | "succeed" | "fail";
  };
  on_failure?: "abort" | "retry" | "continue";
};

/** A task: steps run in array order (docs/definitions.md#task). */
export type Task = {
  id: string;
  description?: string;
  input_schema?: JsonSchema;
  output_schema?: JsonSchema;
  steps: Step[];
};

/** Every stored token, newest first: never a secret nor its hash. */
export type TokenList = {
  tokens: ({
    token_id: string;
    name: string;
    roles: ("reader" | "runner" | "approver" | "author" | "admin")[];
    workflows: string[] | null;
    expires_at: string | null;
    created_at: string;
    created_by: string;
  })[];
};

/** The implementation of an action of kind "tool" (docs/definitions.md#implementation-per-kind). */
export type ToolImplementation = {
  tool: string;
  version?: string;
  resource_name?: string;
};

/** What undoes a completed call of the action (docs/definitions.md#undo-and-compensation). */
export type Undo = {
  action: Reference | InlineUndoAction;
  input_mapping?: InputMapping;
  retry?: RetryPolicy;
};

/** The implementation of an action of kind "vector" (docs/definitions.md#implementation-per-kind). */
export type VectorImplementation = {
  index: string;
  operation?: "query" | "upsert";
  query_template?: string;
  vector?: string;
  top_k?: number;
  filter?: {
    [key: string]: JsonValue;
  };
  embedding_model?: string;
  namespace?: string;
  return_metadata?: "none" | "indexed" | "all";
  text_template?: string;
};

/** A webhook: how its deliveries are verified and the event each becomes (docs/definitions.md#webhooks). */
export type Webhook = {
  id: string;
  description?: string;
  verify: {
    scheme: "standard-webhooks" | "github" | "stripe" | "hmac-sha256";
    secret: string;
    tolerance_ms?: number;
  };
  event: {
    name: JsonValue;
    id?: JsonValue;
    data?: JsonValue;
  };
};

/** Any JSON the sender signed: its raw bytes are verified before they are parsed. */
export type WebhookDelivery = unknown;

/** The caller: a token (kind token: token_id, name) or a Cloudflare Access identity (kind access: email, groups), its roles, the workflows it is limited to (null: every workflow) and the created_by its runs record. */
export type Whoami = {
  principal: {
    kind: "token";
    token_id: string;
    name: string;
    roles: ("reader" | "runner" | "approver" | "author" | "admin")[];
    workflows: string[] | null;
    created_by: string;
  } | {
    kind: "access";
    email: string;
    groups: string[];
    roles: ("reader" | "runner" | "approver" | "author" | "admin")[];
    workflows: string[] | null;
    created_by: string;
  };
};

/** A workflow: nodes forming a DAG through depends_on (docs/definitions.md#workflow). */
export type Workflow = {
  id: string;
  description?: string;
  input_schema?: JsonSchema;
  output_schema?: JsonSchema;
  max_parallel?: number;
  limits?: ({
    limit: Reference;
    key?: string;
  })[];
  fail_fast?: boolean;
  timeout_ms?: number;
  tools?: string[];
  compensate?: "on_failure" | "on_cancel" | "always" | "never";
  retention?: {
    completed_days?: number;
    failed_days?: number;
    cancelled_days?: number;
    archive?: boolean;
  };
  resources?: {
    [key: string]: {
      type: "container";
    };
  };
  triggers?: ({
    event: string;
    if?: string;
    input?: InputMapping;
  })[];
  mcp?: {
    expose: boolean;
    description?: string;
  };
  nodes: {
    [key: string]: Node;
  };
};

/** A child workflow chosen at run time (docs/definitions.md#choosing-work-at-run-time). */
export type WorkflowChoice = {
  from: string;
  allowed: Reference[];
};

/** The implementation of an action of kind "workflow" (docs/definitions.md#implementation-per-kind). */
export type WorkflowImplementation = {
  workflow: Reference | WorkflowChoice;
  on_failure?: "propagate" | "return";
};

/** Every type above by its name. */
export interface Components {
  Action: Action;
  ApproveBody: ApproveBody;
  BackfillAnswer: BackfillAnswer;
  BackfillBody: BackfillBody;
  CancelBody: CancelBody;
  ContextImplementation: ContextImplementation;
  CreatedToken: CreatedToken;
  CreateTokenBody: CreateTokenBody;
  DefinitionBundle: DefinitionBundle;
  DefinitionList: DefinitionList;
  DefinitionRecord: DefinitionRecord;
  DefinitionVersions: DefinitionVersions;
  DeletedRun: DeletedRun;
  EraseBody: EraseBody;
  ErasedRun: ErasedRun;
  ErrorBody: ErrorBody;
  EventImplementation: EventImplementation;
  EventTriggers: EventTriggers;
  GateAnswerBody: GateAnswerBody;
  GateLinkAnswer: GateLinkAnswer;
  GateLinkBody: GateLinkBody;
  GateList: GateList;
  GateView: GateView;
  Health: Health;
  HttpImplementation: HttpImplementation;
  HumanImplementation: HumanImplementation;
  InlineAction: InlineAction;
  InlineTask: InlineTask;
  InlineUndoAction: InlineUndoAction;
  InputMapping: InputMapping;
  JournalEntry: JournalEntry;
  JournalResponse: JournalResponse;
  JsonDocument: JsonDocument;
  JsonSchema: JsonSchema;
  JsonValue: JsonValue;
  Jwks: Jwks;
  LimitStatus: LimitStatus;
  LlmImplementation: LlmImplementation;
  McpImplementation: McpImplementation;
  McpMessage: McpMessage;
  McpServer: McpServer;
  McpToolList: McpToolList;
  MetricImplementation: MetricImplementation;
  Model: Model;
  Node: Node;
  NodeDetail: NodeDetail;
  OpenGateList: OpenGateList;
  OutputMapping: OutputMapping;
  PlanImplementation: PlanImplementation;
  PlanRequest: PlanRequest;
  Prompt: Prompt;
  Reference: Reference;
  RegisterResponse: RegisterResponse;
  RetryPolicy: RetryPolicy;
  RevokedToken: RevokedToken;
  RunList: RunList;
  RunView: RunView;
  ScheduleStatus: ScheduleStatus;
  SendEventsBody: SendEventsBody;
  SendEventsResponse: SendEventsResponse;
  ShellImplementation: ShellImplementation;
  SleepImplementation: SleepImplementation;
  SlotRecord: SlotRecord;
  StartPlanResponse: StartPlanResponse;
  StartRunBody: StartRunBody;
  StartRunResponse: StartRunResponse;
  Step: Step;
  Task: Task;
  TokenList: TokenList;
  ToolImplementation: ToolImplementation;
  Undo: Undo;
  VectorImplementation: VectorImplementation;
  Webhook: Webhook;
  WebhookDelivery: WebhookDelivery;
  Whoami: Whoami;
  Workflow: Workflow;
  WorkflowChoice: WorkflowChoice;
  WorkflowImplementation: WorkflowImplementation;
}
