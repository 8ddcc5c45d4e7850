// bsl-lens for VS Code: starts `bsl-lens lsp`, adds search by meaning, status and reindex.
//
// No language is contributed: existing BSL extensions (1c-syntax "Language 1C (BSL)" and
// others) own the `bsl` id, grammar and their own language server. The client selects
// files by pattern (`**/*.bsl`), so it works whatever language id another extension gave
// them, or none.
import * as vscode from "vscode";
import { LanguageClient, LanguageClientOptions, ServerOptions, State, TransportKind } from "vscode-languageclient/node";
import { initializationOptions, RESTART_KEYS, SECTION, serverCommand } from "./config";
import { searchByMeaning } from "./search";

let client: LanguageClient | undefined;
let output: vscode.LogOutputChannel;
let statusItem: vscode.StatusBarItem;
let statusTimer: NodeJS.Timeout | undefined;
let lastStatus: unknown;
let restarting: Promise<void> | undefined;

async function startClient(): Promise<void> {
  const cmd = await serverCommand(vscode.workspace.workspaceFolders?.[0]?.uri);
  output.appendLine(`starting ${[cmd.command, ...cmd.args].join(" ")} (from ${cmd.source})`);
  const serverOptions: ServerOptions = {
    command: cmd.command,
    args: cmd.args,
    transport: TransportKind.stdio,
    options: { env: { ...process.env, PYTHONUNBUFFERED: "1" } },
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [
      { scheme: "file", pattern: "**/*.bsl" },
      { scheme: "file", language: "bsl" },
    ],
    initializationOptions: initializationOptions(),
    outputChannel: output,
  };
  const c = new LanguageClient("bslLens", "bsl-lens", serverOptions, clientOptions);
  client = c;
  c.onDidChangeState((e) => {
    if (e.newState === State.Stopped && client === c) {
      void refreshStatus();
    }
  });
  try {
    await c.start();
  } catch (err) {
    output.appendLine(`the server did not start: ${err}`);
    void vscode.window
      .showErrorMessage(
        `bsl-lens: the language server did not start (${cmd.command}). Set bslLens.serverCommand or bslLens.pythonPath.`,
        "Open settings",
      )
      .then((pick) => pick && vscode.commands.executeCommand("workbench.action.openSettings", SECTION));
  }
  pollStatus();
}

async function stopClient(): Promise<void> {
  const c = client;
  client = undefined;
  if (c) {
    try {
      await c.stop(5000);
    } catch (err) {
      output.appendLine(`stopping the server: ${err}`);
    }
  }
}

function restart(): Promise<void> {
  if (!restarting) {
    restarting = (async () => {
      await stopClient();
      await startClient();
    })().finally(() => (restarting = undefined));
  }
  return restarting;
}

async function executeServerCommand(command: string, ...args: unknown[]): Promise<unknown> {
  if (!client || !client.isRunning()) {
    throw new Error("the bsl-lens server is not running");
  }
  return client.sendRequest("workspace/executeCommand", { command, arguments: args });
}

// ---- status bar --------------------------------------------------------------------

interface FolderStatus {
  name?: string;
  state?: string;
  error?: string | null;
  daemon?: {
    state?: string;
    files?: number;
    methods?: number;
    progress?: { stage?: string; done?: number; total?: number };
    dense?: { enabled?: boolean; done?: number; total?: number };
    stale_count?: number;
    queued_paths?: number;
    last_index?: { at?: number };
    last_error?: string | null;
  };
}

function pct(done?: number, total?: number): string {
  return total ? `${Math.floor((100 * (done ?? 0)) / total)}%` : "";
}

/** Short text and tooltip for the status bar from the `bsl-lens.status` answer. */
export function describeStatus(status: { folders?: FolderStatus[] }): { text: string; tooltip: string; busy: boolean } {
  const folders = status.folders ?? [];
  const lines: string[] = [];
  let text = "ready";
  let rank = 0; // the most urgent state wins: 4 error, 3 connecting, 2 indexing, 1 embedding/updating
  for (const f of folders) {
    const d = f.daemon;
    let line: string;
    let r = 0;
    let t = "ready";
    if (f.error || d?.last_error) {
      r = 4;
      t = "error";
      line = `error: ${f.error ?? d?.last_error}`;
    } else if (!d || f.state !== "ready") {
      r = 3;
      t = f.state ?? "starting";
      line = t;
    } else if (d.state !== "ready") {
      r = 2;
      t = `indexing ${pct(d.progress?.done, d.progress?.total)}`.trim();
      line = `${t} (${d.progress?.stage ?? d.state})`;
    } else if (d.dense?.enabled && (d.dense.total ?? 0) > 0 && (d.dense.done ?? 0) < (d.dense.total ?? 0)) {
      r = 1;
      t = `embedding ${pct(d.dense.done, d.dense.total)}`;
      line = `${t}; names and words are searchable`;
    } else if ((d.queued_paths ?? 0) > 0 || (d.stale_count ?? 0) > 0) {
      r = 1;
      t = "updating";
      line = `updating ${(d.queued_paths ?? 0) || d.stale_count} changed files`;
    } else {
      const at = d.last_index?.at;
      const ago = at ? `, last change indexed ${new Date(at * 1000).toLocaleTimeString()}` : "";
      line = `ready: ${d.files ?? 0} files, ${d.methods ?? 0} methods, up to date${ago}`;
    }
    lines.push(`${f.name ?? "folder"}: ${line}`);
    if (r > rank) {
      rank = r;
      text = t;
    }
  }
  if (folders.length === 0) {
    text = "no folder";
    lines.push("No workspace folder: open the export root as a folder.");
  }
  return { text, tooltip: lines.join("\n") + "\n\nClick: index status", busy: rank >= 1 && rank <= 3 };
}

async function refreshStatus(): Promise<void> {
  if (!client || !client.isRunning()) {
    statusItem.text = "$(circle-slash) bsl-lens: stopped";
    statusItem.tooltip = "The bsl-lens server is not running. Click: index status";
    return;
  }
  try {
    const st = (await executeServerCommand("bsl-lens.status")) as { folders?: FolderStatus[] };
    lastStatus = st;
    const { text, tooltip, busy } = describeStatus(st);
    statusItem.text = `${busy ? "$(sync~spin)" : "$(search)"} bsl-lens: ${text}`;
    statusItem.tooltip = tooltip;
  } catch (err) {
    statusItem.text = "$(warning) bsl-lens";
    statusItem.tooltip = String(err);
  }
}

function pollStatus(): void {
  if (statusTimer) {
    clearTimeout(statusTimer);
    statusTimer = undefined;
  }
  const seconds = vscode.workspace.getConfiguration(SECTION).get<number>("statusInterval", 3);
  if (!seconds || seconds <= 0) {
    statusItem.hide();
    return;
  }
  statusItem.show();
  const tick = async () => {
    if (vscode.window.state.focused) {
      await refreshStatus();
    }
    statusTimer = setTimeout(tick, seconds * 1000);
  };
  void tick();
}

// ---- commands ----------------------------------------------------------------------

async function showStatus(): Promise<void> {
  let st: unknown;
  try {
    st = await executeServerCommand("bsl-lens.status");
  } catch (err) {
    st = lastStatus ?? { error: String(err) };
  }
  const doc = await vscode.workspace.openTextDocument({ language: "json", content: JSON.stringify(st, null, 2) });
  await vscode.window.showTextDocument(doc, { preview: true });
}

async function reindex(): Promise<void> {
  try {
    const res = (await executeServerCommand("bsl-lens.reindex", { full: true })) as { queued?: string[] };
    const n = res?.queued?.length ?? 0;
    void vscode.window.showInformationMessage(
      n ? `bsl-lens: re-checking ${n} folder(s) by content hash` : "bsl-lens: no folder is connected yet",
    );
    await refreshStatus();
  } catch (err) {
    void vscode.window.showErrorMessage(`bsl-lens: reindex failed: ${err}`);
  }
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("bsl-lens", { log: true });
  statusItem = vscode.window.createStatusBarItem("bslLens.status", vscode.StatusBarAlignment.Left, 0);
  statusItem.name = "bsl-lens";
  statusItem.command = "bslLens.status";
  statusItem.text = "$(sync~spin) bsl-lens";
  context.subscriptions.push(
    output,
    statusItem,
    vscode.commands.registerCommand("bslLens.search", () => {
      const editor = vscode.window.activeTextEditor;
      const selected = editor && !editor.selection.isEmpty ? editor.document.getText(editor.selection) : "";
      searchByMeaning(() => client, selected);
    }),
    vscode.commands.registerCommand("bslLens.status", showStatus),
    vscode.commands.registerCommand("bslLens.reindex", reindex),
    vscode.commands.registerCommand("bslLens.restart", restart),
    vscode.workspace.onDidChangeConfiguration((e) => {
      if (RESTART_KEYS.some((k) => e.affectsConfiguration(`${SECTION}.${k}`))) {
        output.appendLine("settings changed: restarting the server");
        void restart();
      } else if (e.affectsConfiguration(`${SECTION}.statusInterval`)) {
        pollStatus();
      }
    }),
    { dispose: () => statusTimer && clearTimeout(statusTimer) },
  );
  await startClient();
}

export async function deactivate(): Promise<void> {
  if (statusTimer) {
    clearTimeout(statusTimer);
  }
  await stopClient();
}
