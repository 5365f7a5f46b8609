/**
 * A conservative reader of bash command text, for `lib/expr/shell-template.ts`.
 *
 * The shell template renders each `{{…}}` as a mark (`NUL <n> NUL`); this
 * module walks the rendered text once, the way bash would parse it, and
 * 1. writes a variable reference in place of each mark, quoted for where the
 *    mark stands (plain, `"…"`, `'…'`, `$'…'`, or bare inside arithmetic);
 * 2. finds the marks that stand where bash **evaluates** text instead of
 *    using it as data: arithmetic (`$(( ))`, `$[ ]`, `(( ))`, `for (( ))`),
 *    array subscripts (`a[…]=`, `${a[…]}`, `([…]=…)`), substring offsets
 *    (`${v:…:…}`), the operands of `[[ … -eq/-ne/-lt/-le/-gt/-ge … ]]`,
 *    variable names (`[[ -v … ]]`, `test -v`, `${!…}`, `printf -v`, `read`,
 *    `mapfile`, `unset`, `declare`/`local`/`typeset`/`readonly`/`export`),
 *    and the arguments of `let`, `eval`, `trap`, `compgen`/`complete`, the
 *    script of `bash -c`/`sh -c`, and the values of `declare -i/-n/-a/-A`;
 * 3. follows the command's own variables: which shell variables bash
 *    evaluates in those places, and which marks (or other variables) each
 *    variable is assigned from (`x=…`, `declare x=…`, `for x in …`, `read x`
 *    from a here-string, heredoc or `echo`/`printf`, `set -- …` and the
 *    arguments of functions the command defines, as the pseudo-variable `@`).
 *
 * "Conservative" means: where the reader cannot tell, it takes the reading
 * under which bash evaluates (e.g. every subscript is arithmetic, as it is
 * for indexed arrays; `$((` is arithmetic even where bash would fall back to
 * a command substitution). It does not run or expand anything.
 */
import { Scanner } from "./shell-scan-analysis.ts";
import type { QuoteForm, ShellScan } from "./shell-scan-core.ts";

export { MARK, MAX_SHELL_NESTING } from "./shell-scan-core.ts";
export type { Flow, QuoteForm, ShellScan } from "./shell-scan-core.ts";

/**
 * Reads `text` (rendered, with marks) as bash would and places the references.
 * @param reference writes the reference to value `index` for a quoting form.
 * @throws EngineError `shell.unsafe_template` for a mark right after a backslash
 *   (the backslash would escape the reference's quoting) or inside a quoted heredoc
 *   (where it would never be expanded).
 */
export function scanShellCommand(text: string, reference: (index: number, form: QuoteForm) => string): ShellScan {
  const scanner = new Scanner(text, reference);
  return scanner.run();
}
