import type * as vscode from 'vscode';
import type { KnownGoodApi } from './api';
import { Container } from './container';

export function activate(context: vscode.ExtensionContext): KnownGoodApi {
  const container = new Container(context);
  context.subscriptions.push(container);
  return container.api;
}

export function deactivate(): void {
  /* the container is disposed through context.subscriptions */
}
