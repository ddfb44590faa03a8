import * as vscode from 'vscode';

/**
 * The few window/workspace calls the extension makes, each wrapped in one line so the VS Code surface stays small
 * and visible (as vscode-python-environments does).
 */
export const showError = (message: string, ...items: string[]) => vscode.window.showErrorMessage(message, ...items);
export const showWarning = (message: string, options: vscode.MessageOptions, ...items: string[]) =>
  vscode.window.showWarningMessage(message, options, ...items);
export const showInfo = (message: string, ...items: string[]) => vscode.window.showInformationMessage(message, ...items);
export const showInputBox = (options: vscode.InputBoxOptions) => vscode.window.showInputBox(options);
export const showQuickPick = <T extends vscode.QuickPickItem>(items: readonly T[] | Thenable<readonly T[]>, options: vscode.QuickPickOptions) =>
  vscode.window.showQuickPick(items, options);
export const withProgress = <R>(
  options: vscode.ProgressOptions,
  task: (progress: vscode.Progress<{ message?: string; increment?: number }>, token: vscode.CancellationToken) => Thenable<R>,
) => vscode.window.withProgress(options, task);
export const getConfiguration = (section: string) => vscode.workspace.getConfiguration(section);
