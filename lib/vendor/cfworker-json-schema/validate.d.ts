/** Types of the vendored validate.js (see its header); the package's own declaration, with `unknown` for `any`. */
import type { Schema, SchemaDraft, ValidationResult } from "@cfworker/json-schema";

export declare function validate(instance: unknown, schema: Schema | boolean, draft?: SchemaDraft, lookup?: Record<string, Schema | boolean>, shortCircuit?: boolean): ValidationResult;
