import * as vscode from 'vscode';
import { z } from 'zod';
import type { KnownGoodSettings } from '../core/settings';
import type { BaselineStore } from '../core/baselines/store';
import { isKnownGoodError, KnownGoodError } from '../core/errors';
import { hostAddress, type HostSpec } from '../core/hosts';
import type { Container } from '../container';
import { showQuickPick, withProgress } from '../window';
import type { EnvContentProvider } from './content';
import type { BaselinesSection } from './section';

/** What the baselines commands share: built once in registerBaselines. */
export interface BaselinesFeature {
  c: Container;
  store: BaselineStore;
  section: BaselinesSection;
  content: EnvContentProvider;
}

export function baselineSettings(c: Container): KnownGoodSettings['baselines'] {
  return c.settings.current.baselines;
}

/** The store's key for a host: its transport id, the same whichever name the host has in settings. */
export function storeHostOf(c: Container, hostId: string): string | undefined {
  try {
    return c.registry.session(hostId).transport.id;
  } catch {
    return undefined;
  }
}

const hostNodeArg = z.object({ kind: z.literal('host'), host: z.object({ id: z.string() }) });
const hostIdArg = z.object({ hostId: z.string() });

/** The host a command was invoked on: a host node, any node under a host, or `{ hostId }` (tests, other commands). */
export function hostFromArg(c: Container, arg: unknown): HostSpec | undefined {
  const h = hostNodeArg.safeParse(arg);
  const id = h.success ? h.data.host.id : hostIdArg.safeParse(arg).data?.hostId;
  if (id === undefined) return undefined;
  const spec = c.registry.find(id);
  if (!spec) throw new KnownGoodError('not-found', `host ${id} is no longer configured`);
  return spec;
}

export async function pickHost(c: Container, placeHolder: string): Promise<HostSpec | undefined> {
  const items = c.registry.hosts().map((host) => ({
    label: host.name,
    description: hostAddress(host),
    detail: host.roots.length ? `roots: ${host.roots.join(', ')}` : 'no checkpoint roots',
    host,
  }));
  const pick = await showQuickPick(items, { placeHolder, matchOnDescription: true, ignoreFocusOut: true });
  return pick?.host;
}

export type Report = (message: string, fraction?: number) => void;

/**
 * A notification with Cancel: the token becomes an AbortSignal for the remote work. A cancel resolves to
 * undefined (nothing to report); other failures propagate to the command's error handling.
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
