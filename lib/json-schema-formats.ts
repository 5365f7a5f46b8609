import { format as libraryFormats } from "@cfworker/json-schema";
import { checkEcmaPatternSyntax } from "./expr/regex-syntax.ts";
import { chargeValidation } from "./json-schema-hooks.ts";

/** Budget steps (25 ns each, `json-schema-hooks.ts`) a format check costs per character: linear checks measure up to 80 ns. */
const FORMAT_STEPS_PER_CHAR = 4;
/** `regex` parses the string as a pattern: up to 290 ns per character (nested groups). */
const REGEX_FORMAT_STEPS_PER_CHAR = 12;

function metered(check: (value: string) => boolean, stepsPerChar: number): (value: string) => boolean {
  return (value) => {
    chargeValidation(1 + value.length * stepsPerChar);
    return check(value);
  };
}

/** The library's `\Z` check, then V8's parser (`expr/regex-syntax.ts`): the library's `regex`, without building `\p{…}` sets. */
export function isRegex(value: string): boolean {
  return !Z_ANCHOR.test(value) && checkEcmaPatternSyntax(value) === undefined;
}

/** The library refuses a `\Z` anchor, which other dialects have and ECMAScript has not. */
const Z_ANCHOR = /[^\\]\\Z/;

/** The library's `url` (http, https or ftp, a public IPv4 address or a host with a top-level domain, an optional port and path), without backtracking. */
const URL_SCHEME = /^(?:https?|ftp):\/\//i;
const URL_NO_SPACE = /^\S*$/u;
/** The host, then an optional port: the library's expression with each label written `L+(?:-L+)*`, the same strings as its `(?:L+-?)*L+`. */
const URL_HOST_PORT = new RegExp(
  "^(?:(?!10(?:\\.\\d{1,3}){3})(?!127(?:\\.\\d{1,3}){3})(?!169\\.254(?:\\.\\d{1,3}){2})(?!192\\.168(?:\\.\\d{1,3}){2})(?!172\\.(?:1[6-9]|2\\d|3[0-1])(?:\\.\\d{1,3}){2})" +
    "(?:[1-9]\\d?|1\\d\\d|2[01]\\d|22[0-3])(?:\\.(?:1?\\d{1,2}|2[0-4]\\d|25[0-5])){2}(?:\\.(?:[1-9]\\d?|1\\d\\d|2[0-4]\\d|25[0-4]))" +
    "|[a-z\\u{00a1}-\\u{ffff}0-9]+(?:-[a-z\\u{00a1}-\\u{ffff}0-9]+)*(?:\\.[a-z\\u{00a1}-\\u{ffff}0-9]+(?:-[a-z\\u{00a1}-\\u{ffff}0-9]+)*)*(?:\\.[a-z\\u{00a1}-\\u{ffff}]{2,}))" +
    "(?::\\d{2,5})?$",
  "iu",
);

/**
 * The library's expression is `scheme (userinfo@)? host (:port)? (/path)?` where userinfo
 * and path are any non-space characters. A host and port contain no `@` and no `/`, so the
 * host starts at 0 or just after an `@` that no other `@` follows before the next `/`, and
 * ends at that `/` (or the end): each such candidate is checked once, in linear time.
 */
export function isUrl(value: string): boolean {
  const scheme = URL_SCHEME.exec(value);
  if (scheme === null) {
    return false;
  }
  const rest = value.slice(scheme[0].length);
  if (!URL_NO_SPACE.test(rest)) {
    return false;
  }
  for (let start = 0; ;) {
    const slash = rest.indexOf("/", start);
    const end = slash === -1 ? rest.length : slash;
    const at = rest.slice(start, end).lastIndexOf("@");
    // After the last '@' of this chunk (a non-empty userinfo before it), or at 0 with no userinfo.
    const hostStart = at !== -1 ? (start + at >= 1 ? start + at + 1 : -1) : start === 0 ? 0 : -1;
    if (hostStart !== -1 && URL_HOST_PORT.test(rest.slice(hostStart, end))) {
      return true;
    }
    if (slash === -1) {
      return false;
    }
    start = slash + 1;
  }
}

/**
 * The `format` checks JSON Schema validation applies: @cfworker/json-schema's, each
 * charged to the validation's budget by the length of the string it reads, with one
 * replaced. Measured in Node 22 (V8) against long adversarial strings (tokens such as
 * `a.::`, `%aa`, `a-`, `0:` repeated to 3,000 and 100,000 characters, then a bad last
 * character): every check but `url` is linear, at most about 80 ns per character
 * (`uri`) and 290 ns for `regex`, which parses the string as a pattern. `url`'s
 * regular expression nests `(?:[a-z…0-9]+-?)*` and backtracks exponentially: 28
 * characters (`http://` + `a` × 21) took 2 s, ×16 per 4 more. {@link isUrl} accepts
 * the same strings in linear time. `regex` compiled the string with `new RegExp`, whose
 * parser builds the character set of every `\p{…}` (about 50 µs for `\p{L}`: a megabyte
 * of them is ten seconds); {@link isRegex} gives V8's answer without building them.
 *
 * The table has no prototype, so a schema's `format: "__proto__"` or `"constructor"`
 * names no check (the library's object literal answered with `Object.prototype` and
 * crashed the validation).
 */
export const SCHEMA_FORMATS: Readonly<Record<string, (value: string) => boolean>> = Object.assign(
  Object.create(null) as Record<string, (value: string) => boolean>,
  {
    ...Object.fromEntries(
      Object.entries(libraryFormats).map(([name, check]) => [name, metered(check, FORMAT_STEPS_PER_CHAR)]),
    ),
    url: metered(isUrl, FORMAT_STEPS_PER_CHAR),
    regex: metered(isRegex, REGEX_FORMAT_STEPS_PER_CHAR),
  },
);
