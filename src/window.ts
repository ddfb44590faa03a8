import * as vscode from 'vscode';

/**
 * The few window/workspace calls the extension makes, each wrapped in one line so the VS Code surface stays small
 * and visible (as vscode-python-environments does).
 */
export const showError = (message: string, ...items: string[]) => vscode.window.showErrorMessage(message, ...items);
export const showWarning = (message: string, options: vscode.MessageOptions, ...items: string[]) =>
  vscode.window.showWarningMessage(message, options, ...items);
export const showInfo = (message: string, ...items: string[]) =>
  vscode.window.showInformationMessage(message, ...items);
/** A question that waits for an answer (a dialog): `detail` under the message, Cancel added by VS Code. */
export const showModal = (message: string, detail: string, ...items: string[]) =>
  vscode.window.showInformationMessage(message, { modal: true, detail }, ...items);
export const showInputBox = (options: vscode.InputBoxOptions) => vscode.window.showInputBox(options);
export const showQuickPick = <T extends vscode.QuickPickItem>(
  items: readonly T[] | Thenable<readonly T[]>,
  options: vscode.QuickPickOptions,
) => vscode.window.showQuickPick(items, options);
export const createQuickPick = <T extends vscode.QuickPickItem>() => vscode.window.createQuickPick<T>();
export const withProgress = <R>(
  options: vscode.ProgressOptions,
  task: (
    progress: vscode.Progress<{ message?: string; increment?: number }>,
    token: vscode.CancellationToken,
  ) => Thenable<R>,
) => vscode.window.withProgress(options, task);
export const getConfiguration = (section: string) => vscode.workspace.getConfiguration(section);
/** False in Restricted Mode (the person has not trusted the folder's authors). */
export const isWorkspaceTrusted = () => vscode.workspace.isTrusted;
export const onDidGrantWorkspaceTrust = (listener: () => unknown) =>
  vscode.workspace.onDidGrantWorkspaceTrust(listener);
export const createWebviewPanel = (
  viewType: string,
  title: string,
  column: vscode.ViewColumn,
  options: vscode.WebviewPanelOptions & vscode.WebviewOptions,
) => vscode.window.createWebviewPanel(viewType, title, column, options);
export const registerWebviewPanelSerializer = (viewType: string, serializer: vscode.WebviewPanelSerializer) =>
  vscode.window.registerWebviewPanelSerializer(viewType, serializer);
export const executeCommand = <T = unknown>(command: string, ...rest: unknown[]) =>
  vscode.commands.executeCommand<T>(command, ...rest);
export const createTerminal = (options: vscode.ExtensionTerminalOptions) => vscode.window.createTerminal(options);
export const createStatusBarItem = (id: string, alignment: vscode.StatusBarAlignment, priority?: number) =>
  vscode.window.createStatusBarItem(id, alignment, priority);
export const showTextDocument = async (uri: vscode.Uri, options?: vscode.TextDocumentShowOptions) =>
  vscode.window.showTextDocument(await vscode.workspace.openTextDocument(uri), options);
export const registerTextDocumentContentProvider = (scheme: string, provider: vscode.TextDocumentContentProvider) =>
  vscode.workspace.registerTextDocumentContentProvider(scheme, provider);
export const registerReadonlyFileSystemProvider = (scheme: string, provider: vscode.FileSystemProvider) =>
  vscode.workspace.registerFileSystemProvider(scheme, provider, { isCaseSensitive: true, isReadonly: true });
/** Every editor tab of the window, and closing some (`preserveFocus`: the focus stays where it is). */
export const openTabs = () => vscode.window.tabGroups.all.flatMap((g) => g.tabs);
export const closeTabs = (tabs: readonly vscode.Tab[]) => vscode.window.tabGroups.close([...tabs], true);
export const activeEditorUri = (): vscode.Uri | undefined => vscode.window.activeTextEditor?.document.uri;
export const showOpenDialog = (options: vscode.OpenDialogOptions) => vscode.window.showOpenDialog(options);
