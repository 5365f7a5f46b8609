/**
 * Secret values bound to the test Worker (vitest.config.ts) and referenced by
 * test definitions as `$env:LLM_API_KEY` / `$env:MCP_TOKEN`. Distinctive
 * strings, so a test can assert that they appear nowhere they must not
 * (journals, run views, events, errors).
 */
export const TEST_SECRETS = {
  LLM_API_KEY: "sk-trellis-test-9f2c41d7e0b3a6",
  MCP_TOKEN: "mcp-trellis-test-5b8e02a9c4f1d3",
  /** The local OTLP receiver's key, sent in OTEL_EXPORTER_OTLP_HEADERS (vitest.config.ts). */
  OTLP_API_KEY: "otlp-trellis-test-7d1e93b0a25c48",
} as const;

/**
 * Webhook secrets bound to the test Worker (vitest.config.ts), referenced by
 * test webhooks as `$env:…`. The Standard Webhooks and GitHub ones are the
 * secrets of those providers' published example signatures.
 */
export const WEBHOOK_SECRETS = {
  WEBHOOK_STANDARD_SECRET: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
  WEBHOOK_GITHUB_SECRET: "It's a Secret to Everybody",
  WEBHOOK_STRIPE_SECRET: "whsec_trellis-test-stripe-3c9a51e07d",
  WEBHOOK_HMAC_SECRET: "hmac-trellis-test-8e2b6f4a19",
} as const;
