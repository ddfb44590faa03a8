import { z } from 'zod';

/*
 * The messages between the "What Changed?" panel (the extension host) and its page. The page is rendered on the host
 * (html.ts) from the report; the page only says what was clicked, by position in the report, and the host looks the
 * evidence up in the report it holds: nothing the page sends is trusted as a link.
 */

const index = z.number().int().min(0).max(10_000);

export const whatChangedViewMessageSchema = z.discriminatedUnion('type', [
  /** Open evidence `evidence` of suspect `suspect` (its row's first one when the row itself was clicked). */
  z.object({ type: z.literal('open'), suspect: index, evidence: index }),
  z.object({ type: z.literal('copy') }),
  z.object({ type: z.literal('refresh') }),
  /** Bisect All Changes: replay every change between the run's two recorded launches (issue 33). */
  z.object({ type: z.literal('replayAll') }),
]);
export type WhatChangedViewMessage = z.infer<typeof whatChangedViewMessageSchema>;

/** What the host posts: the outcome of a click, shown in the page's status line. */
export interface WhatChangedHostMessage {
  type: 'status';
  text: string;
}

/** A message from the page, or undefined when it is not one (dropped, never acted on). */
export function parseWhatChangedViewMessage(raw: unknown): WhatChangedViewMessage | undefined {
  const r = whatChangedViewMessageSchema.safeParse(raw);
  return r.success ? r.data : undefined;
}

/**
 * Restoring a report panel after a window reload. The page keeps only an id as its webview state (it never holds the
 * report's links: nothing from the page is trusted as one); the extension keeps the report under that id in the
 * workspace's storage and shows it again as gathered (its time is on it; Refresh gathers anew). A kept report is
 * checked for the parts the page and the evidence links use; anything else is not restored.
 */
export const whatChangedPageStateSchema = z.object({ v: z.literal(1), id: z.string().regex(/^[A-Za-z0-9_-]{8,64}$/) });
export type WhatChangedPageState = z.infer<typeof whatChangedPageStateSchema>;

/** The id a restored panel's page kept, or undefined when it is none. */
export function parseWhatChangedPageState(raw: unknown): WhatChangedPageState | undefined {
  const r = whatChangedPageStateSchema.safeParse(raw);
  return r.success ? r.data : undefined;
}

const reportShape = z
  .object({
    headline: z.string(),
    verdict: z.string(),
    generatedAt: z.string(),
    host: z.object({ label: z.string() }).passthrough(),
    reference: z.object({ label: z.string(), why: z.string() }).passthrough(),
    suspects: z.array(
      z
        .object({
          title: z.string(),
          detail: z.string(),
          evidence: z.array(z.object({ kind: z.string() }).passthrough()),
        })
        .passthrough(),
    ),
    changepoints: z.object({ series: z.array(z.unknown()), why: z.string() }).passthrough(),
    unranked: z.array(z.unknown()),
    unknown: z.array(z.unknown()),
    gathered: z.object({}).passthrough(),
  })
  .passthrough();

/** A report panel as the extension keeps it: what it was opened on, and the report. */
export const whatChangedPanelStateSchema = z.object({
  v: z.literal(1),
  hostId: z.string().min(1),
  run: z.string().nullable(),
  nowCheckpoint: z.string().optional(),
  report: reportShape,
});
export type WhatChangedPanelState = z.infer<typeof whatChangedPanelStateSchema>;

/** A kept report panel, or undefined when it is none (kept by another version, or damaged). */
export function parseWhatChangedPanelState(raw: unknown): WhatChangedPanelState | undefined {
  const r = whatChangedPanelStateSchema.safeParse(raw);
  return r.success ? r.data : undefined;
}
