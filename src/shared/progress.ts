import * as vscode from 'vscode';
import { isKnownGoodError } from '../core/errors';
import { withProgress } from '../window';

/** A step's message and, when known, how far the whole task is (0..1); the bar never moves back. */
export type Report = (message: string, fraction?: number) => void;

/**
 * The one notification with Cancel for remote work: the token becomes the AbortSignal the work is given. A cancel
 * resolves to undefined, whatever the task threw on its way out (an aborted probe, a `cancelled` error): there is
 * nothing to report, and a caller that must not return "nothing" turns it into its own `cancelled`. Every other
 * failure propagates to the command's error handling.
 */
export async function withCancellableProgress<R>(
  title: string,
  task: (signal: AbortSignal, report: Report) => Promise<R>,
): Promise<R | undefined> {
  return withProgress(
    { location: vscode.ProgressLocation.Notification, title, cancellable: true },
    async (progress, token) => {
      const ac = new AbortController();
      const sub = token.onCancellationRequested(() => ac.abort());
      let done = 0;
      const report: Report = (message, fraction) => {
        if (fraction === undefined || fraction <= done) {
          progress.report({ message });
          return;
        }
        progress.report({ message, increment: (fraction - done) * 100 });
        done = fraction;
      };
      try {
        return await task(ac.signal, report);
      } catch (e) {
        if (ac.signal.aborted || isKnownGoodError(e, 'cancelled')) return undefined;
        throw e;
      } finally {
        sub.dispose();
      }
    },
  );
}
