import { z } from "zod";
import { JsonValue } from "../../schemas/common.ts";
import pkg from "../../package.json" with { type: "json" };
import {
  conversionOptions,
  DEFINITION_PARTS,
  namedRegistry,
  withoutKeys,
  type JsonSchemaObject,
} from "./json-schema.ts";
import {
  API_ROUTES,
  PATH_PARAMS,
  REQUEST_SCHEMAS,
  RESPONSE_SCHEMAS,
  SCHEMA_DESCRIPTIONS,
  type RequestSchemaName,
  type ResponseSchemaName,
  type Grant,
  type RouteSpec,
} from "./routes.ts";

/** A JSON object of the OpenAPI document. */
type Doc = Record<string, unknown>;

const COMPONENT_REF = "#/components/schemas/";

/** Each status an error can have, and when. */
const ERROR_STATUSES: Record<number, string> = {
  400: "Invalid request: `details` lists each problem with its path.",
  401: "No bearer token, an unknown one, or an expired one (auth.token_expired); a Cloudflare Access assertion that does not verify.",
  403: "The caller lacks the role this route needs, or a grant of every workflow, or is not one of the gate's approvers (auth.forbidden).",
  404: "No such definition, run, node, gate or blob.",
  409: "Conflict: a terminal run, an answered or expired gate, another body under the same idempotency key; a run that has not ended (run.not_terminal).",
  410: "The run was deleted (run.deleted): by its retention or by an operator.",
  413: "The body is larger than the input limits allow.",
  500: "The deployment is misconfigured (a webhook's secret is not set).",
  502: "A blob's stored bytes do not hash to its digest (blob.corrupt): they are never served.",
  503: "A part of the service (the run index, an event hub) is unavailable for now: try again.",
};

/** What a token limited to workflows meets on a route, by its grant (src/contracts/routes.ts `Grant`). */
const GRANT_NOTES: Record<Grant, string> = {
  run: "; a run of a workflow outside the token's grant is 404",
  workflow: "; a workflow outside the token's grant is 404",
  definition: "; a workflow outside the token's grant is 404",
  listing: "; a token limited to workflows sees only theirs",
  any: "",
  every: "; a token limited to workflows is refused (403)",
};

/**
 * The OpenAPI 3.1 document of the HTTP API, built from {@link API_ROUTES} and
 * the zod schemas: request bodies converted as input, responses as output,
 * each named schema a component (the definition language's parts too).
 */
export function openApiDocument(): Doc {
  const paths: Record<string, Doc> = {};
  for (const route of API_ROUTES) {
    const item = (paths[route.path] ??= {});
    if (item[route.method]) {
      throw new Error(`two routes are ${route.method.toUpperCase()} ${route.path}`);
    }
    item[route.method] = operationOf(route);
  }
  return {
    openapi: "3.1.0",
    info: {
      title: "Trellis API",
      version: pkg.version,
      description:
        "A durable workflow engine on Cloudflare Workers (docs/api.md). Generated from the zod " +
        "schemas in schemas/ and the route table in src/contracts/routes.ts by `npm run schemas`; do not edit.",
    },
    tags: ["meta", "definitions", "runs", "gates", "journal", "events", "schedules", "limits", "tokens", "mcp"].map(
      (name) => ({
        name,
      }),
    ),
    security: [{ bearer: [] }],
    paths,
    components: {
      securitySchemes: {
        bearer: {
          type: "http",
          scheme: "bearer",
          description:
            "A token of the secret API_TOKENS (an admin), or one made by POST /v1/tokens (its roles; docs/security.md).",
        },
      },
      schemas: componentSchemas(),
    },
  };
}

/** Request bodies (as input) and responses (as output), each a component, with what they refer to. */
export function componentSchemas(): Record<string, JsonSchemaObject> {
  const inputs = namedRegistry([...DEFINITION_PARTS, ...described(REQUEST_SCHEMAS)]);
  const outputs = namedRegistry([[JsonValue, "JsonValue", "any JSON value"], ...described(RESPONSE_SCHEMAS)]);
  const components: Record<string, JsonSchemaObject> = {};
  for (const [registry, io] of [
    [inputs, "input"],
    [outputs, "output"],
  ] as const) {
    const { schemas } = z.toJSONSchema(registry, {
      ...conversionOptions(io),
      metadata: registry,
      uri: (id) => `${COMPONENT_REF}${id}`,
    });
    for (const [name, schema] of Object.entries(schemas)) {
      const component = withoutKeys(schema, ["$schema", "$id"]);
      const existing = components[name];
      if (existing && JSON.stringify(existing) !== JSON.stringify(component)) {
        throw new Error(`the component ${name} differs between requests and responses: name them apart`);
      }
      components[name] = component;
    }
  }
  return Object.fromEntries(Object.entries(components).sort(([a], [b]) => a.localeCompare(b)));
}

/** A table of bodies as registry entries, each with its description. */
function described(schemas: Record<string, z.ZodType>): [z.ZodType, string, string][] {
  return Object.entries(schemas).map(([name, schema]) => [
    schema,
    name,
    SCHEMA_DESCRIPTIONS[name as RequestSchemaName | ResponseSchemaName],
  ]);
}

function operationOf(route: RouteSpec): Doc {
  const parameters = [
    ...[...route.path.matchAll(/\{([a-z_]+)\}/g)].map(([, name = ""]) => pathParameter(name, route.path)),
    ...Object.entries(route.query ?? {}).map(([name, param]) => ({
      name,
      in: "query",
      required: false,
      description: param.description,
      schema: { type: param.type },
    })),
    ...Object.entries(route.headers ?? {}).map(([name, param]) => ({
      name,
      in: "header",
      required: false,
      description: param.description,
      schema: { type: param.type },
    })),
  ];
  return {
    operationId: route.operationId,
    summary: route.summary,
    description:
      route.auth === "bearer"
        ? `${route.role === "any" ? "Any token or Access identity, whatever its roles" : `Needs the role ${route.role} (admin holds every role)`}${GRANT_NOTES[route.grant]}. docs/api.md, "${route.docs}".`
        : `No token. docs/api.md, "${route.docs}".`,
    ...(route.auth === "bearer" ? { "x-trellis-role": route.role, "x-trellis-grant": route.grant } : {}),
    tags: [route.tag],
    ...(route.auth === "public" ? { security: [] } : {}),
    ...(parameters.length > 0 ? { parameters } : {}),
    ...(route.body ? { requestBody: requestBodyOf(route.body) } : {}),
    responses: { ...successResponses(route), ...errorResponses(route) },
  };
}

function pathParameter(name: string, path: string): Doc {
  const description = PATH_PARAMS[name];
  if (description === undefined) {
    throw new Error(`the path parameter {${name}} of ${path} is not described in PATH_PARAMS`);
  }
  return { name, in: "path", required: true, description, schema: { type: name === "version" ? "integer" : "string" } };
}

function requestBodyOf(body: NonNullable<RouteSpec["body"]>): Doc {
  const media = { schema: { $ref: `${COMPONENT_REF}${body.schema}` } };
  return {
    required: body.required,
    ...(body.required ? {} : { description: "Optional: an empty body is {}." }),
    content: { "application/json": media, ...(body.yaml ? { "application/yaml": media } : {}) },
  };
}

function successResponses(route: RouteSpec): Record<string, Doc> {
  return Object.fromEntries(
    Object.entries(route.responses).map(([status, response]) => [
      status,
      {
        description: response.description,
        ...(response.schema === "empty" ? {} : { content: contentOf(response.schema) }),
      },
    ]),
  );
}

function contentOf(schema: ResponseSchemaName | "events" | "mcp" | "blob"): Doc {
  const stream = (data: string): Doc => ({
    "text/event-stream": { schema: { type: "string", description: `Server-Sent Events; each data is ${data}.` } },
  });
  if (schema === "events") {
    return stream("a JournalEntry (a component)");
  }
  if (schema === "blob") {
    return {
      "application/json": { schema: { description: "The value whose canonical JSON (UTF-8) the bytes are." } },
      "application/octet-stream": { schema: { type: "string", format: "binary" } },
    };
  }
  if (schema === "mcp") {
    return {
      ...stream("a JSON-RPC message (McpMessage, a component)"),
      "application/json": { schema: { $ref: `${COMPONENT_REF}McpMessage` } },
    };
  }
  return { "application/json": { schema: { $ref: `${COMPONENT_REF}${schema}` } } };
}

/** 401 on every bearer route, 400 and 413 on every route with a body, and the route's own. */
function errorResponses(route: RouteSpec): Record<string, Doc> {
  const statuses = new Set<number>(route.errors ?? []);
  if (route.auth === "bearer") {
    statuses.add(401).add(403);
  }
  if (route.body) {
    statuses.add(400).add(413);
  }
  return Object.fromEntries(
    [...statuses]
      .sort((a, b) => a - b)
      .map((status) => [
        String(status),
        {
          description:
            status === 401 && route.auth === "public"
              ? "A missing, invalid or stale signature: the credential of a webhook delivery."
              : (ERROR_STATUSES[status] ?? "An error."),
          content: { "application/json": { schema: { $ref: `${COMPONENT_REF}ErrorBody` } } },
        },
      ]),
  );
}
