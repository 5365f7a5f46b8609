/**
 * Secret values bound to the test Worker (vitest.config.ts) and referenced by
 * test definitions as `$env:LLM_API_KEY` / `$env:MCP_TOKEN`. Distinctive
 * strings, so a test can assert that they appear nowhere they must not
 * (journals, run views, events, errors).
 */
export const TEST_SECRETS = {
  LLM_API_KEY: "sk-trellis-test-9f2c41d7e0b3a6",
  MCP_TOKEN: "mcp-trellis-test-5b8e02a9c4f1d3",
} as const;
