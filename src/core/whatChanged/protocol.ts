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
