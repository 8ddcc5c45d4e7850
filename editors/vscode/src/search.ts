// "Search 1C by meaning": a QuickPick fed by the server's `bsl-lens/search` request.
import * as vscode from "vscode";
import type { LanguageClient } from "vscode-languageclient/node";
import { SECTION } from "./config";

interface LspRange {
  start: { line: number; character: number };
  end: { line: number; character: number };
}

interface Hit {
  name: string;
  kind: string;
  symbolKind?: number;
  containerName?: string;
  owner?: string;
  path: string;
  location: { uri: string; range: LspRange };
  signature?: string;
  snippet?: string;
  export?: boolean;
}

interface SearchResult {
  hits: Hit[];
  folders?: { name?: string; state?: string; error?: string; denseDone?: number; denseTotal?: number }[];
}

interface HitItem extends vscode.QuickPickItem {
  hit?: Hit;
}

const DEBOUNCE_MS = 250;

// LSP SymbolKind -> codicon
const ICONS: Record<number, string> = {
  2: "symbol-module",
  5: "symbol-class",
  6: "symbol-method",
  8: "symbol-field",
  12: "symbol-function",
  17: "symbol-file",
  19: "symbol-object",
  22: "symbol-enum-member",
  24: "symbol-event",
};

function oneLine(text: string | undefined, max = 160): string {
  const s = (text ?? "").replace(/\s+/g, " ").trim();
  return s.length > max ? s.slice(0, max - 1) + "…" : s;
}

function toItem(hit: Hit): HitItem {
  const icon = ICONS[hit.symbolKind ?? 0] ?? "symbol-misc";
  return {
    label: `$(${icon}) ${hit.name}`,
    description: hit.containerName || hit.owner || hit.path,
    detail: oneLine(hit.snippet || hit.signature) || hit.path,
    alwaysShow: true, // the server ranked them; the QuickPick must not filter by letters
    hit,
  };
}

function incomplete(res: SearchResult): string | undefined {
  for (const f of res.folders ?? []) {
    if (f.error) {
      return `${f.name ?? ""}: ${f.error}`;
    }
    if (f.state && f.state !== "ready") {
      return `${f.name ?? ""}: ${f.state}`;
    }
    if (f.denseTotal && (f.denseDone ?? 0) < f.denseTotal) {
      return `${f.name ?? ""}: embedding ${Math.floor((100 * (f.denseDone ?? 0)) / f.denseTotal)}%, meaning search incomplete`;
    }
  }
  return undefined;
}

export async function openHit(hit: Hit): Promise<void> {
  const r = hit.location.range;
  const range = new vscode.Range(r.start.line, r.start.character, r.end.line, r.end.character);
  await vscode.window.showTextDocument(vscode.Uri.parse(hit.location.uri), { selection: range, preview: false });
}

/** Show the QuickPick; every keystroke (debounced) cancels the previous request. */
export function searchByMeaning(getClient: () => LanguageClient | undefined, initial = ""): void {
  const qp = vscode.window.createQuickPick<HitItem>();
  qp.title = "bsl-lens: search 1C by meaning";
  qp.placeholder = "Describe what the code does, e.g. «где считается НДС с авансов»";
  qp.matchOnDescription = true;
  qp.matchOnDetail = true;
  qp.value = initial;
  let timer: NodeJS.Timeout | undefined;
  let cts: vscode.CancellationTokenSource | undefined;

  const run = async (query: string) => {
    cts?.cancel();
    cts?.dispose();
    cts = undefined;
    if (!query.trim()) {
      qp.items = [];
      qp.busy = false;
      return;
    }
    const client = getClient();
    if (!client || !client.isRunning()) {
      qp.items = [{ label: "bsl-lens server is not running", detail: "Run “bsl-lens: Restart server” and see the bsl-lens output" }];
      return;
    }
    const mine = (cts = new vscode.CancellationTokenSource());
    const cfg = vscode.workspace.getConfiguration(SECTION);
    qp.busy = true;
    try {
      const res = await client.sendRequest<SearchResult>(
        "bsl-lens/search",
        { query, mode: cfg.get<string>("searchMode", "hybrid"), topK: cfg.get<number>("searchTopK", 20) },
        mine.token,
      );
      if (mine.token.isCancellationRequested) {
        return;
      }
      const items: HitItem[] = res.hits.map(toItem);
      const note = incomplete(res);
      if (items.length === 0) {
        items.push({ label: "No results", detail: note });
      } else if (note) {
        items.push({ label: "", kind: vscode.QuickPickItemKind.Separator }, { label: "$(info) " + note, alwaysShow: true });
      }
      qp.items = items;
    } catch (err) {
      if (!mine.token.isCancellationRequested) {
        qp.items = [{ label: "$(error) Search failed", detail: String(err), alwaysShow: true }];
      }
    } finally {
      if (cts === mine) {
        qp.busy = false;
      }
    }
  };

  qp.onDidChangeValue((value) => {
    if (timer) {
      clearTimeout(timer);
    }
    timer = setTimeout(() => void run(value), DEBOUNCE_MS);
  });
  qp.onDidAccept(async () => {
    const hit = qp.selectedItems[0]?.hit;
    if (hit) {
      qp.hide();
      await openHit(hit);
    }
  });
  qp.onDidHide(() => {
    if (timer) {
      clearTimeout(timer);
    }
    cts?.cancel();
    qp.dispose();
  });
  qp.show();
  if (initial) {
    void run(initial);
  }
}
