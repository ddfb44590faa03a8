// The one handle on the host. Inside VS Code `acquireVsCodeApi` exists (and may be called only once); in a plain
// browser (tests, trying the bundle by hand) a shim records what would have been posted.
import type { WebviewMessageInput } from '../../src/core/dashboard/protocol';

interface RawApi {
  postMessage(message: unknown): void;
  getState(): unknown;
  setState(state: unknown): void;
}

export interface HostApi {
  post(message: WebviewMessageInput): void;
  getState(): unknown;
  setState(state: unknown): void;
}

declare global {
  interface Window {
    acquireVsCodeApi?: () => RawApi;
    /** Set by the shim only: every message the dashboard posted, oldest first. */
    __kgPosted?: unknown[];
  }
}

export function connectHost(): HostApi {
  let raw: RawApi;
  if (typeof window.acquireVsCodeApi === 'function') {
    raw = window.acquireVsCodeApi();
  } else {
    const posted: unknown[] = [];
    window.__kgPosted = posted;
    let state: unknown;
    raw = {
      postMessage: (m) => {
        posted.push(m);
        console.debug('[known-good] would post', m);
      },
      getState: () => state,
      setState: (s) => {
        state = s;
      },
    };
  }
  return {
    post: (m) => raw.postMessage(m),
    getState: () => raw.getState(),
    setState: (s) => raw.setState(s),
  };
}
