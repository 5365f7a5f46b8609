/** The signed-in principal, for every page below the app: what it may do decides which buttons are shown. */
import { createContext } from "preact";
import { useContext } from "preact/hooks";
import type { Principal } from "../../schemas/auth.ts";
import { may, mayAnswer, type ConsoleOperation } from "./session.ts";
import type { GateView } from "../../schemas/api.ts";

export const PrincipalContext = createContext<Principal | null>(null);

/** Whether the signed-in principal may call the operation (nothing is allowed before sign-in). */
export function useMay(operation: ConsoleOperation): boolean {
  const principal = useContext(PrincipalContext);
  return principal !== null && may(principal, operation);
}

/** Whether the signed-in principal may answer the gate. */
export function useMayAnswer(gate: Pick<GateView, "approvers">): boolean {
  const principal = useContext(PrincipalContext);
  return principal !== null && mayAnswer(principal, gate);
}

/** The signed-in principal's may-check for any operation (for lists of buttons). */
export function useMayAny(): (operation: ConsoleOperation) => boolean {
  const principal = useContext(PrincipalContext);
  return (operation) => principal !== null && may(principal, operation);
}
