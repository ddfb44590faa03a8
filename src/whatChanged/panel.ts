import * as vscode from 'vscode';
import { WHAT_CHANGED_VIEW_TYPE } from '../constants';
import { messageOf } from '../core/errors';
import { newNonce } from '../core/util/nonce';
import { whatChangedHtml } from '../core/whatChanged/html';
import type { EvidenceLink, Suspect, WhatChangedReport } from '../core/whatChanged/model';
import {
  parseWhatChangedViewMessage,
  type WhatChangedHostMessage,
  type WhatChangedViewMessage,
} from '../core/whatChanged/protocol';
import { evidenceText, renderWhatChangedMarkdown } from '../core/whatChanged/render';
import { createWebviewPanel, showError } from '../window';

// the page loads nothing: its style and script are inline, by nonce
const WEBVIEW_OPTIONS: vscode.WebviewOptions = { enableScripts: true, localResourceRoots: [] };

/** What the panel does with a click: open the evidence (the feature maps each kind to a view), copy, refresh. */
export interface ReportActions {
  open(link: EvidenceLink, suspectTitle: string, detail: string): Promise<unknown>;
  refresh(): Promise<unknown>;
  /**
   * Prove by Replay on a suspect, or Bisect All Changes (null): resolves to the line the page's status shows when it
   * ends (the report itself is shown again by the feature, with the replay's word on it).
   */
  replay(suspect: Suspect | null): Promise<string | undefined>;
  log: Pick<vscode.LogOutputChannel, 'info' | 'error'>;
}

/**
 * One "What Changed?" report in a webview panel. The page is rendered on this side from the report (every text
 * escaped, html.ts); the page posts which suspect or button was clicked, and the link is looked up in the report held
 * here. Showing a new report for the same target replaces the page of the same panel.
 */
export class WhatChangedPanel implements vscode.Disposable {
  readonly panel: vscode.WebviewPanel;
  private report_: WhatChangedReport;
  private readonly subscriptions: vscode.Disposable[] = [];
  /** Valid messages received, oldest first (tests read them). */
  readonly received: WhatChangedViewMessage['type'][] = [];

  constructor(
    readonly key: string,
    title: string,
    report: WhatChangedReport,
    private readonly actions: ReportActions,
    onDispose: (p: WhatChangedPanel) => void,
    /** Keeps the report for a restore after a reload; returns what the page keeps (its id). */
    private readonly keep: (report: WhatChangedReport) => unknown,
    /** A panel VS Code restored after a reload: shown again instead of a new one. */
    restored?: vscode.WebviewPanel,
  ) {
    this.report_ = report;
    if (restored) {
      restored.webview.options = WEBVIEW_OPTIONS;
      this.panel = restored;
    } else {
      this.panel = createWebviewPanel(WHAT_CHANGED_VIEW_TYPE, title, vscode.ViewColumn.Active, {
        ...WEBVIEW_OPTIONS,
        enableFindWidget: true,
      });
    }
    this.render();
    this.subscriptions.push(
      this.panel.webview.onDidReceiveMessage((raw: unknown) => void this.onMessage(raw)),
      this.panel.onDidDispose(() => {
        onDispose(this);
        this.dispose();
      }),
    );
  }

  get report(): WhatChangedReport {
    return this.report_;
  }

  show(report: WhatChangedReport): void {
    this.report_ = report;
    this.render();
    this.panel.reveal();
  }

  private render(): void {
    const webview = this.panel.webview;
    webview.html = whatChangedHtml(this.report_, {
      cspSource: webview.cspSource,
      nonce: newNonce(24),
      state: this.keep(this.report_),
    });
  }

  private post(m: WhatChangedHostMessage): void {
    void this.panel.webview.postMessage(m);
  }

  private async onMessage(raw: unknown): Promise<void> {
    const m = parseWhatChangedViewMessage(raw);
    if (!m) {
      this.actions.log.info(`What Changed?: dropped a message that is not one (${JSON.stringify(raw)?.slice(0, 200)})`);
      return;
    }
    this.received.push(m.type);
    try {
      switch (m.type) {
        case 'copy':
          await vscode.env.clipboard.writeText(renderWhatChangedMarkdown(this.report_));
          this.post({ type: 'status', text: 'Copied as Markdown.' });
          return;
        case 'refresh':
          await this.actions.refresh();
          return;
        case 'replayAll': {
          this.post({ type: 'status', text: 'Bisect All Changes: planning the replay…' });
          this.post({ type: 'status', text: (await this.actions.replay(null)) ?? '' });
          return;
        }
        case 'open': {
          const s = this.report_.suspects[m.suspect];
          const link = s?.evidence[m.evidence];
          if (!s || !link) {
            this.post({ type: 'status', text: 'No evidence to open for that row.' });
            return;
          }
          if (link.kind === 'replay') {
            this.post({ type: 'status', text: `Prove by Replay: ${s.title}: planning the replay…` });
            this.post({ type: 'status', text: (await this.actions.replay(s)) ?? '' });
            return;
          }
          this.post({ type: 'status', text: `Opening ${evidenceText(link)}…` });
          await this.actions.open(link, s.title, s.detail);
          this.post({ type: 'status', text: '' });
          return;
        }
      }
    } catch (e) {
      this.actions.log.error(`What Changed?: ${m.type}: ${messageOf(e)}`);
      this.post({ type: 'status', text: messageOf(e) });
      void showError(messageOf(e));
    }
  }

  dispose(): void {
    for (const d of this.subscriptions.splice(0)) d.dispose();
    this.panel.dispose();
  }
}
