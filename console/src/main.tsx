/**
 * The Trellis web console: a single-page app served by the Worker as static
 * assets (docs/architecture.md#the-web-console), talking to the same API as
 * any client, with the token the user signs in with.
 */
import { render } from "preact";
import { useEffect, useState } from "preact/hooks";
import { clearToken, readToken, saveToken, SIGNED_OUT_EVENT } from "./api.ts";
import { GatesPage } from "./gates-page.tsx";
import { Link, useRoute, type Route } from "./router.tsx";
import { RunPage } from "./run-page.tsx";
import { RunsPage } from "./runs-page.tsx";
import { SchedulesPage } from "./schedules-page.tsx";
import { WorkflowPage, WorkflowsPage } from "./workflow-pages.tsx";

function App() {
  const [token, setToken] = useState(readToken);
  const [signedOut, setSignedOut] = useState(false);
  useEffect(() => {
    const onSignedOut = (): void => {
      setToken(null);
      setSignedOut(true);
    };
    window.addEventListener(SIGNED_OUT_EVENT, onSignedOut);
    return () => window.removeEventListener(SIGNED_OUT_EVENT, onSignedOut);
  }, []);
  const route = useRoute();
  if (token === null) {
    return (
      <SignIn
        refused={signedOut}
        onSignIn={(value) => {
          saveToken(value);
          setSignedOut(false);
          setToken(value);
        }}
      />
    );
  }
  return (
    <>
      <nav class="top">
        <Link href="/" class="brand">
          Trellis
        </Link>
        <Link href="/">Runs</Link>
        <Link href="/gates">Waiting for me</Link>
        <Link href="/workflows">Workflows</Link>
        <Link href="/schedules">Schedules</Link>
        <button
          type="button"
          class="link"
          onClick={() => {
            clearToken();
            setToken(null);
          }}
        >
          Sign out
        </button>
      </nav>
      <main>
        <Page route={route} />
      </main>
    </>
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

/** The sign-in form: the token is kept in sessionStorage, for this tab's session only. */
function SignIn(props: { refused: boolean; onSignIn: (token: string) => void }) {
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
        <p class="muted">
          One of the Worker's <code>API_TOKENS</code> (<code>dev-token</code> under <code>npm run dev</code>). It is
          kept for this browser tab only and sent as a bearer header.
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
