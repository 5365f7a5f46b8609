/**
 * The Trellis web console: a single-page app served by the Worker as static
 * assets (docs/architecture.md#the-web-console), talking to the same API as
 * any client, as the principal `GET /v1/whoami` names: the token the user
 * signs in with, or their Cloudflare Access identity when Access is in front.
 */
import { render } from "preact";
import { useEffect, useRef, useState } from "preact/hooks";
import type { Principal } from "../../schemas/auth.ts";
import { clearToken, readAccessHint, readToken, saveAccessHint, saveToken, SIGNED_OUT_EVENT } from "./api.ts";
import { GatesPage } from "./gates-page.tsx";
import { LimitsPage } from "./limits-page.tsx";
import { PrincipalContext } from "./principal.tsx";
import { Link, useRoute, type Route } from "./router.tsx";
import { RunPage } from "./run-page.tsx";
import { RunsPage } from "./runs-page.tsx";
import { SchedulesPage } from "./schedules-page.tsx";
import { principalText, whoami, type Session } from "./session.ts";
import { WorkflowPage, WorkflowsPage } from "./workflow-pages.tsx";

/** Access's own sign-out path, on every hostname an Access application protects. */
const ACCESS_LOGOUT = "/cdn-cgi/access/logout";

/** How the tab signs in: a token, or Cloudflare Access (no token: the browser's Access session); null: not yet. */
type Credential = { kind: "token"; token: string } | { kind: "access" } | null;

function initialCredential(): Credential {
  const token = readToken();
  return token !== null ? { kind: "token", token } : readAccessHint() ? { kind: "access" } : null;
}

function App() {
  const [credential, setCredential] = useState<Credential>(initialCredential);
  const session = useSession(credential);
  useEffect(() => {
    const onSignedOut = (): void => setCredential(null);
    window.addEventListener(SIGNED_OUT_EVENT, onSignedOut);
    return () => window.removeEventListener(SIGNED_OUT_EVENT, onSignedOut);
  }, []);
  const route = useRoute();
  if (session.state === "checking") {
    return <main class="sign-in muted">Signing in…</main>;
  }
  if (session.state === "signed_out") {
    return (
      <SignIn
        refused={session.refused}
        problem={session.problem}
        onSignIn={(value) => {
          saveToken(value);
          setCredential({ kind: "token", token: value });
        }}
        onAccess={() => setCredential({ kind: "access" })}
      />
    );
  }
  const signOut = (): void => {
    if (session.via === "access") {
      window.location.assign(ACCESS_LOGOUT);
      return;
    }
    clearToken();
    setCredential(null);
  };
  return (
    <PrincipalContext.Provider value={session.principal}>
      <TopNav principal={session.principal} onSignOut={signOut} />
      <main>
        <Page route={route} />
      </main>
    </PrincipalContext.Provider>
  );
}

/**
 * Who the credential signs in as (`GET /v1/whoami`). A token the API refuses
 * is forgotten; an Access sign-in that works is remembered for later visits,
 * one that finds no identity is not.
 */
function useSession(credential: Credential): Session {
  const [session, setSession] = useState<Session>({ state: "checking" });
  const wasRefused = useRef(false);
  useEffect(() => {
    if (credential === null) {
      setSession({ state: "signed_out", refused: wasRefused.current, problem: null });
      return;
    }
    let live = true;
    setSession({ state: "checking" });
    void whoami(credential.kind === "token" ? credential.token : null).then((found) => {
      if (found.state === "signed_out" && found.refused) {
        clearToken();
      }
      if (credential.kind === "access") {
        saveAccessHint(found.state === "signed_in");
      }
      if (live) {
        wasRefused.current = false;
        setSession(found);
      }
    });
    return () => {
      live = false;
    };
  }, [credential]);
  useEffect(() => {
    const onSignedOut = (): void => {
      wasRefused.current = true;
    };
    window.addEventListener(SIGNED_OUT_EVENT, onSignedOut);
    return () => window.removeEventListener(SIGNED_OUT_EVENT, onSignedOut);
  }, []);
  return session;
}

function TopNav(props: { principal: Principal; onSignOut: () => void }) {
  return (
    <nav class="top">
      <Link href="/" class="brand">
        Trellis
      </Link>
      <Link href="/">Runs</Link>
      <Link href="/gates">Waiting for me</Link>
      <Link href="/workflows">Workflows</Link>
      <Link href="/schedules">Schedules</Link>
      <Link href="/limits">Limits</Link>
      <span class="whoami" data-principal={props.principal.kind}>
        {principalText(props.principal)}
      </span>
      <button type="button" class="link" onClick={props.onSignOut}>
        Sign out
      </button>
    </nav>
  );
}

function Page(props: { route: Route }) {
  const { route } = props;
  switch (route.page) {
    case "runs":
      return <RunsPage query={route.query} />;
    case "run":
      return <RunPage key={route.runId} runId={route.runId} />;
    case "gates":
      return <GatesPage />;
    case "workflows":
      return <WorkflowsPage />;
    case "schedules":
      return <SchedulesPage />;
    case "limits":
      return <LimitsPage key={route.query.toString()} query={route.query} />;
    case "workflow":
      return <WorkflowPage key={route.id} id={route.id} />;
    case "not_found":
      return (
        <p class="error">
          No page at {route.path}. <Link href="/">Back to the runs</Link>
        </p>
      );
  }
}

/**
 * The sign-in form: the token is kept in sessionStorage, for this tab's
 * session only. Behind Cloudflare Access the form is not shown: the
 * console is signed in as the Access identity.
 */
function SignIn(props: {
  refused: boolean;
  problem: string | null;
  onSignIn: (token: string) => void;
  onAccess: () => void;
}) {
  const [value, setValue] = useState("");
  return (
    <main class="sign-in">
      <h1>Trellis</h1>
      <form
        onSubmit={(event) => {
          event.preventDefault();
          if (value.trim() !== "") {
            props.onSignIn(value.trim());
          }
        }}
      >
        <label for="api-token">API token</label>
        <input
          id="api-token"
          type="password"
          autocomplete="off"
          value={value}
          onInput={(e) => setValue(e.currentTarget.value)}
        />
        <button type="submit">Sign in</button>
        {props.refused ? <p class="error">The API refused that token (401): sign in again.</p> : null}
        {props.problem === null ? null : <p class="error">{props.problem}</p>}
        <p class="muted">
          One of the Worker's <code>API_TOKENS</code> (<code>dev-token</code> under <code>npm run dev</code>), or a
          token made by <code>trellis tokens create</code>. It is kept for this browser tab only and sent as a bearer
          header.
        </p>
        <button type="button" class="access-sign-in" onClick={props.onAccess}>
          Use Cloudflare Access
        </button>
        <p class="muted">
          Behind Cloudflare Access, no token is needed: the console acts as your Access identity, with the roles the
          deployment's <code>ACCESS_ROLES</code> gives it. This browser then signs in that way on later visits.
        </p>
      </form>
    </main>
  );
}

const root = document.getElementById("app");
if (root !== null) {
  root.textContent = "";
  render(<App />, root);
}
