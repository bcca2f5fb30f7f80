// pbot-watch inside Pi: native history and memory tools, `/history`, memory cues after each
// compaction, and a footer status.
//
// This file is UI and wiring only. Every answer comes from one long-lived `pbot-watch pi serve`
// child per Pi process, over JSON lines on its stdin and stdout (docs/pi.md in pbot-watch);
// the logic, and its tests, live in Python. `pbot-watch pi install` writes `pbot-watch.json`
// beside this file: how to start that child, the tools' names, descriptions and schemas, and
// the page sizes `/history` asks for (the tools' own defaults: no limit is written here), so the
// tools are registered synchronously at load and no process starts from the factory.
//
// Failure isolation (pi-echo's rule): if pbot-watch is missing, crashes or is slow, Pi keeps
// working. Every request has a deadline; a tool then answers with an error that says it is
// "temporarily unavailable" (never "no match"); the child is restarted with back-off; cues and
// the footer are best effort and never hold up a turn for longer than a short wait.

import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { ExtensionAPI, ExtensionCommandContext, ExtensionContext, Theme } from "@earendil-works/pi-coding-agent";
import { Text } from "@earendil-works/pi-tui";

const CONFIG_FILE = "pbot-watch.json";
const STATUS_KEY = "pbot-watch";
const CUES_TYPE = "pbot-watch-cues";
const BACKOFF_FIRST_MS = 1_000;
const BACKOFF_MAX_MS = 60_000;
const KILL_AFTER_TIMEOUTS = 2; // consecutive missed deadlines before a stuck child is replaced
const STDERR_TAIL = 2_000;
const COLLAPSED_ITEMS = 5; // hits or nodes listed under a tool call before it is expanded

// ---- the config file written by `pbot-watch pi install` -----------------------------------------

interface ToolSpec {
	name: string;
	label: string;
	description: string;
	parameters: Record<string, unknown>;
}

interface Timeouts {
	toolMs: number;
	cuesMs: number;
	cueWaitMs: number;
	statusMs: number;
	footerEveryMs: number;
}

/** The page sizes `/history` asks for: the tools' defaults, written from their argument models. */
interface Pages {
	historySearch: number;
	historyRead: number;
}

interface Config {
	format: number;
	version: string;
	command: string[];
	tools: ToolSpec[];
	pages: Pages;
	timeouts: Timeouts;
}

function loadConfig(): Config | Error {
	const path = join(dirname(fileURLToPath(import.meta.url)), CONFIG_FILE);
	try {
		const config = JSON.parse(readFileSync(path, "utf8")) as Config;
		const pages = config.pages as Partial<Pages> | undefined;
		if (
			config.format !== 1 ||
			!Array.isArray(config.command) ||
			!config.command.length ||
			!Array.isArray(config.tools) ||
			typeof pages?.historySearch !== "number" ||
			typeof pages?.historyRead !== "number"
		) {
			throw new Error("not a config this extension understands");
		}
		return config;
	} catch (error) {
		return new Error(`pbot-watch: cannot use ${path} (${messageOf(error)}); run \`pbot-watch pi install\` again`);
	}
}

// ---- the child -------------------------------------------------------------------------------------

type FailureKind = "arguments" | "unavailable";

/** Why a request got no result: the caller must change it, or pbot-watch cannot answer now. */
class Failure extends Error {
	constructor(
		readonly kind: FailureKind,
		message: string,
	) {
		super(message);
	}
}

interface Pending {
	resolve: (value: unknown) => void;
	reject: (error: Failure) => void;
	timer: ReturnType<typeof setTimeout>;
}

/** One `pbot-watch pi serve` child, started on first need, restarted with back-off. */
class Bridge {
	private child: ChildProcess | undefined;
	private readonly pending = new Map<number, Pending>();
	private nextId = 1;
	private buffered = "";
	private stderrTail = "";
	private failures = 0;
	private retryAt = 0;
	private problem = "";
	private missedDeadlines = 0;

	constructor(readonly config: Config) {}

	request<T>(method: string, params: unknown, timeoutMs: number, signal?: AbortSignal): Promise<T> {
		return new Promise<T>((resolve, reject) => {
			const child = this.ensure();
			if (!child?.stdin) {
				const wait = Math.max(0, Math.ceil((this.retryAt - Date.now()) / 1000));
				reject(new Failure("unavailable", `${this.problem}; next start in ${wait} s`));
				return;
			}
			const id = this.nextId++;
			const timer = setTimeout(() => {
				if (!this.pending.delete(id)) return;
				reject(new Failure("unavailable", `pbot-watch did not answer within ${timeoutMs / 1000} s`));
				this.missedDeadline(child);
			}, timeoutMs);
			this.pending.set(id, { resolve: resolve as (value: unknown) => void, reject, timer });
			signal?.addEventListener(
				"abort",
				() => {
					if (!this.pending.delete(id)) return;
					clearTimeout(timer);
					reject(new Failure("unavailable", "cancelled"));
				},
				{ once: true },
			);
			child.stdin.write(`${JSON.stringify({ id, method, params })}\n`);
		});
	}

	/** Stop the child: close its stdin (it exits at end of input), SIGTERM if it lingers. */
	close(): void {
		const child = this.child;
		this.child = undefined;
		this.rejectAll("pbot-watch is shutting down");
		if (!child) return;
		child.stdin?.end();
		const timer = setTimeout(() => child.kill("SIGTERM"), 2_000);
		timer.unref();
		child.once("exit", () => clearTimeout(timer));
	}

	private ensure(): ChildProcess | undefined {
		if (this.child) return this.child;
		if (Date.now() < this.retryAt) return undefined;
		const [command, ...args] = this.config.command;
		let child: ChildProcess;
		try {
			child = spawn(command!, args, { stdio: ["pipe", "pipe", "pipe"], windowsHide: true });
		} catch (error) {
			this.failed(`cannot start ${command}: ${messageOf(error)}`);
			return undefined;
		}
		this.child = child;
		this.buffered = "";
		this.stderrTail = "";
		child.stdout?.setEncoding("utf8");
		child.stdout?.on("data", (chunk: string) => this.onData(child, chunk));
		child.stderr?.setEncoding("utf8");
		child.stderr?.on("data", (chunk: string) => {
			this.stderrTail = (this.stderrTail + chunk).slice(-STDERR_TAIL);
		});
		// Streams of a dead child emit EPIPE and the like: the exit handler reports it once.
		child.stdin?.on("error", () => {});
		child.stdout?.on("error", () => {});
		child.stderr?.on("error", () => {});
		child.on("error", (error) => this.gone(child, `cannot start ${command}: ${error.message}`));
		child.on("exit", (code, signal) =>
			this.gone(child, signal ? `pbot-watch was stopped (${signal})` : `pbot-watch exited (code ${code})${this.lastWords()}`),
		);
		// Pi must be able to exit while the child idles; pending requests hold the loop with their timers.
		child.unref();
		for (const stream of [child.stdin, child.stdout, child.stderr]) (stream as { unref?: () => void } | null)?.unref?.();
		return child;
	}

	private onData(child: ChildProcess, chunk: string): void {
		if (child !== this.child) return;
		this.buffered += chunk;
		for (let end = this.buffered.indexOf("\n"); end >= 0; end = this.buffered.indexOf("\n")) {
			const line = this.buffered.slice(0, end);
			this.buffered = this.buffered.slice(end + 1);
			if (line.trim()) this.onLine(line);
		}
	}

	private onLine(line: string): void {
		let reply: { id?: unknown; result?: unknown; error?: { kind?: unknown; message?: unknown } };
		try {
			reply = JSON.parse(line);
		} catch {
			return; // not a reply (the child logs to stderr); whatever was waiting for it times out
		}
		const pending = typeof reply.id === "number" ? this.pending.get(reply.id) : undefined;
		if (!pending) return; // an answer after its deadline
		this.pending.delete(reply.id as number);
		clearTimeout(pending.timer);
		this.failures = 0;
		this.missedDeadlines = 0;
		if (reply.error) {
			const kind: FailureKind = reply.error.kind === "arguments" ? "arguments" : "unavailable";
			pending.reject(new Failure(kind, String(reply.error.message ?? "pbot-watch failed")));
		} else {
			pending.resolve(reply.result);
		}
	}

	private missedDeadline(child: ChildProcess): void {
		this.missedDeadlines += 1;
		if (this.missedDeadlines < KILL_AFTER_TIMEOUTS || child !== this.child) return;
		this.gone(child, "pbot-watch stopped answering");
		child.kill("SIGKILL");
	}

	private gone(child: ChildProcess, problem: string): void {
		if (child !== this.child) return;
		this.child = undefined;
		this.failed(problem);
		this.rejectAll(problem);
	}

	private failed(problem: string): void {
		this.failures += 1;
		this.missedDeadlines = 0;
		this.problem = problem;
		this.retryAt = Date.now() + Math.min(BACKOFF_MAX_MS, BACKOFF_FIRST_MS * 2 ** (this.failures - 1));
	}

	private rejectAll(problem: string): void {
		for (const pending of this.pending.values()) {
			clearTimeout(pending.timer);
			pending.reject(new Failure("unavailable", problem));
		}
		this.pending.clear();
	}

	private lastWords(): string {
		const lines = this.stderrTail.trim().split("\n");
		const last = lines[lines.length - 1]?.trim();
		return last ? `: ${last.slice(0, 300)}` : "";
	}
}

// One child per Pi process: a runtime replaced by /new, /resume, /fork or /reload keeps using it,
// unless `pbot-watch pi install` changed how it is started.
const SHARED = Symbol.for("pbot-watch.bridge");

function sharedBridge(config: Config): Bridge {
	const slot = globalThis as { [SHARED]?: { key: string; bridge: Bridge } };
	const key = JSON.stringify(config);
	const current = slot[SHARED];
	if (current?.key === key) return current.bridge;
	current?.bridge.close();
	const bridge = new Bridge(config);
	slot[SHARED] = { key, bridge };
	return bridge;
}

// ---- native tools ------------------------------------------------------------------------------------

interface ToolReply {
	text: string;
	structured: Record<string, unknown> | null;
	failure: "arguments" | "unavailable" | "internal" | null;
}

/** The calling session's branch: memory tools are pinned to it, whatever the arguments say. */
function scopeOf(ctx: ExtensionContext) {
	const sessions = ctx.sessionManager;
	return { sessionFile: sessions.getSessionFile() ?? null, sessionId: sessions.getSessionId(), leaf: sessions.getLeafId() ?? null };
}

function unavailableText(tool: string, error: unknown): string {
	const failure = error instanceof Failure ? error : new Failure("unavailable", messageOf(error));
	if (failure.kind === "arguments") return `Fix the arguments and call ${tool} again: ${failure.message}`;
	return (
		`${tool} is temporarily unavailable: ${failure.message}. This is not "no match": ` +
		"the history could not be searched just now. Go on without it, or call the tool again later."
	);
}

async function callTool(bridge: Bridge, name: string, args: unknown, ctx: ExtensionContext, signal?: AbortSignal): Promise<ToolReply> {
	return bridge.request<ToolReply>("tool", { name, arguments: args, scope: scopeOf(ctx) }, bridge.config.timeouts.toolMs, signal);
}

function registerTools(pi: ExtensionAPI, bridge: Bridge): void {
	// The same tools over MCP (`mcp__<server>__history_search`, ...) would be offered twice under
	// confusable names: while this package is loaded, their declarations are left out of model
	// requests (they stay callable, from codemode scripts for instance).
	const names = bridge.config.tools.map((tool) => tool.name);
	const shadowed = (tool: string) => tool.startsWith("mcp__") && names.some((name) => tool.endsWith(`__${name}`));
	for (const [index, spec] of bridge.config.tools.entries()) {
		pi.registerTool({
			name: spec.name,
			label: spec.label,
			description: spec.description,
			parameters: spec.parameters as never, // JSON Schema: Pi validates arguments with it as is
			...(index === 0
				? { prepareLoadout: (loadout) => ({ hiddenDeclarations: loadout.declared.map((tool) => tool.name).filter(shadowed) }) }
				: {}),
			async execute(_toolCallId, params, signal, _onUpdate, ctx) {
				try {
					const reply = await callTool(bridge, spec.name, params, ctx, signal);
					// details: the structured result, for renderResult (the model reads content).
					return { content: [{ type: "text", text: reply.text }], details: reply.structured ?? undefined, isError: reply.failure !== null };
				} catch (error) {
					return { content: [{ type: "text", text: unavailableText(spec.name, error) }], details: undefined, isError: true };
				}
			},
			renderCall: (args, theme) => new Text(callLine(spec, args as Record<string, unknown>, theme), 0, 0),
			renderResult: (result, { expanded, isPartial }, theme, context) =>
				new Text(resultLines(result as ToolResultView, expanded, isPartial, context.isError, theme), 0, 0),
		});
	}
}

// ---- how the tools look in Pi's TUI: a one-line call, a compact result, the full text on expand ----

interface ToolResultView {
	content: { type: string; text?: string }[];
	details?: Record<string, unknown>;
}

interface ListedItem {
	kind?: string;
	level?: number;
	name?: string;
	preview?: string;
	shown?: string;
	snippet?: string;
	label?: string;
	context?: string;
	from?: string;
	timestamp?: string;
}

/** `history_search "quince" · literal`: the tool's label and the arguments that say what it looks for. */
function callLine(spec: ToolSpec, args: Record<string, unknown>, theme: Theme): string {
	const main = args.query ?? args.id ?? args.handle ?? args.in;
	let line = theme.fg("toolTitle", theme.bold(spec.label || spec.name));
	if (typeof main === "string" && main) line += ` ${theme.fg("accent", JSON.stringify(flat(main, 80)))}`;
	for (const key of ["match", "sessionId", "from", "to", "offset", "after"]) {
		const value = args[key];
		if (value !== undefined && value !== null && value !== "" && value !== 0) line += theme.fg("dim", ` ${key}=${flat(String(value), 40)}`);
	}
	return line;
}

function itemLine(item: ListedItem): string {
	const when = (item.from ?? item.timestamp ?? "").slice(0, 16);
	if (item.label !== undefined) return `${when} · ${flat(item.label, 70)}${item.context ? ` · ${item.context}` : ""}`;
	const kind = item.kind === "summary" ? `summary L${item.level}` : (item.kind ?? "");
	return `${when} · ${kind} · ${flat(item.shown ?? item.preview ?? item.name ?? "", 70)}`;
}

function resultLines(result: ToolResultView, expanded: boolean, partial: boolean, isError: boolean, theme: Theme): string {
	if (partial) return theme.fg("warning", "searching…");
	const text = result.content.find((part) => part.type === "text")?.text ?? "";
	if (isError) return theme.fg("error", flat(text, expanded ? 2_000 : 200));
	if (expanded) return theme.fg("toolOutput", text);
	const details = result.details ?? {};
	const list = (details.matches ?? details.hits) as ListedItem[] | undefined;
	let out: string;
	let items: ListedItem[] = [];
	if (Array.isArray(list)) {
		const total = typeof details.total === "number" ? details.total : list.length;
		out = theme.fg(total ? "success" : "dim", `${total} ${total === 1 ? "hit" : "hits"}`);
		items = list;
	} else if (typeof details.text === "string") {
		const node = details as ListedItem & { text: string; totalLength?: number; parents?: ListedItem[]; children?: ListedItem[]; totalLines?: number };
		const size = node.totalLines !== undefined ? `${node.totalLines} lines` : `${node.totalLength ?? node.text.length} chars`;
		out = `${theme.fg("success", itemLine(node))} ${theme.fg("dim", `(${size})`)}`;
		items = [...(node.parents ?? []), ...(node.children ?? [])];
	} else {
		return theme.fg("dim", flat(text, 200));
	}
	for (const item of items.slice(0, COLLAPSED_ITEMS)) out += `\n${theme.fg("muted", `  ${itemLine(item)}`)}`;
	if (items.length > COLLAPSED_ITEMS) out += `\n${theme.fg("dim", `  … ${items.length - COLLAPSED_ITEMS} more (expand for the full text)`)}`;
	return out;
}

// ---- memory cues -------------------------------------------------------------------------------------

interface CueReply {
	block: string | null;
}

interface Message {
	role: string;
	timestamp?: number;
}

/**
 * After a compaction, each request carries the branch's cue block (computed by pbot-watch from
 * the session file), placed right after the compaction summary so the prefix stays cacheable.
 */
function registerCues(pi: ExtensionAPI, bridge: Bridge): void {
	let wanted = false; // the branch has a compaction: a block is expected
	let block: string | null = null;
	let inflight: Promise<void> | undefined;

	const refresh = (ctx: ExtensionContext) => {
		const sessions = ctx.sessionManager;
		const file = sessions.getSessionFile();
		wanted = Boolean(file) && sessions.getBranch().some((entry) => entry.type === "compaction");
		block = null;
		inflight = undefined;
		if (!wanted) return;
		const params = { sessionFile: file, leaf: sessions.getLeafId() ?? null, contextWindow: ctx.model?.contextWindow ?? null };
		const run: Promise<void> = bridge.request<CueReply>("cues", params, bridge.config.timeouts.cuesMs).then(
			(reply) => {
				if (inflight !== run) return;
				block = typeof reply?.block === "string" && reply.block ? reply.block : null;
				inflight = undefined;
			},
			() => {
				if (inflight === run) inflight = undefined; // no cues this time; never a failed turn
			},
		);
		inflight = run;
	};

	pi.on("session_start", (_event, ctx) => {
		// Named first: the child reads a marathon session's cue ledger and raw memory between
		// requests, so neither a compaction's cues nor the first search wait for the whole file.
		const file = ctx.sessionManager.getSessionFile();
		if (file) {
			const announced = { sessionFile: file, sessionId: ctx.sessionManager.getSessionId() };
			// The cues' deadline, not the footer's: a child still starting must not count two missed
			// deadlines (the footer's and this one) and be killed for it.
			bridge.request("session", announced, bridge.config.timeouts.cuesMs).catch(() => undefined);
		}
		refresh(ctx);
	});
	pi.on("session_compact", (_event, ctx) => refresh(ctx));
	pi.on("session_tree", (_event, ctx) => refresh(ctx));

	pi.on("context_with_system", async (event) => {
		if (!wanted) return undefined;
		if (inflight) await within(inflight, bridge.config.timeouts.cueWaitMs);
		if (!block) return undefined;
		const messages = event.messages as unknown as Message[];
		let at = -1;
		for (let index = messages.length - 1; index >= 0; index -= 1) {
			if (messages[index]?.role === "compactionSummary") {
				at = index;
				break;
			}
		}
		if (at < 0) return undefined;
		const cue = { role: "custom", customType: CUES_TYPE, content: block, display: false, timestamp: messages[at]?.timestamp ?? 0 };
		return { messages: [...messages.slice(0, at + 1), cue, ...messages.slice(at + 1)] as unknown as typeof event.messages };
	});
}

/** Wait for `promise`, but no longer than `ms`. */
async function within(promise: Promise<unknown>, ms: number): Promise<void> {
	let timer: ReturnType<typeof setTimeout> | undefined;
	await Promise.race([promise, new Promise<void>((resolve) => (timer = setTimeout(resolve, ms)))]);
	clearTimeout(timer);
}

// ---- footer status -----------------------------------------------------------------------------------

function registerFooter(pi: ExtensionAPI, bridge: Bridge): void {
	let timer: ReturnType<typeof setInterval> | undefined;
	let shown: string | undefined;
	let asking = false;
	// One late answer (a child still starting on a busy machine) is not an outage: the footer
	// says "unavailable" only when two asks in a row fail, and keeps what it showed meanwhile.
	let failedAsks = 0;

	pi.on("session_start", (_event, ctx) => {
		if (!ctx.hasUI) return;
		const tick = async () => {
			if (asking) return;
			asking = true;
			let text: string | undefined;
			try {
				const asked = { installed: bridge.config.version };
				const reply = await bridge.request<{ text: string | null }>("footer", asked, bridge.config.timeouts.statusMs);
				text = reply?.text ?? undefined;
				failedAsks = 0;
			} catch {
				failedAsks += 1;
				text = failedAsks >= 2 ? "pbot-watch: unavailable" : shown;
			} finally {
				asking = false;
			}
			if (text === shown || timer === undefined) return;
			shown = text;
			try {
				ctx.ui.setStatus(STATUS_KEY, text);
			} catch {
				// the session was replaced meanwhile
			}
		};
		clearInterval(timer);
		timer = setInterval(() => void tick(), bridge.config.timeouts.footerEveryMs);
		timer.unref();
		void tick();
	});

	pi.on("session_shutdown", (_event, ctx) => {
		clearInterval(timer);
		timer = undefined;
		if (shown !== undefined && ctx.hasUI) ctx.ui.setStatus(STATUS_KEY, undefined);
		shown = undefined;
	});
}

// ---- /history ------------------------------------------------------------------------------------------

interface Brief {
	id: string;
	kind: "session" | "exchange" | "summary";
	level: number;
	name: string;
	preview: string;
	from: string;
	ready: boolean;
}

interface SearchResult {
	total: number;
	nextOffset: number | null;
	matches: (Brief & { snippet: string; shown?: string })[];
}

interface NodePage extends Brief {
	text: string;
	totalLength: number;
	nextOffset: number | null;
	parents: Brief[];
	children: Brief[];
	nextChildrenOffset: number | null;
}

function flat(text: string, limit: number): string {
	const one = text.replace(/\s+/g, " ").trim();
	return one.length <= limit ? one : `${one.slice(0, limit)}…`;
}

function label(node: Brief, text?: string): string {
	const kind = node.kind === "summary" ? `summary L${node.level}${node.ready ? "" : " (not written yet)"}` : node.kind;
	return `${node.from.slice(0, 16)} · ${kind} · ${text ?? flat(node.kind === "session" ? node.name : node.preview, 70)}`;
}

/** What a person reads when /history cannot ask pbot-watch: the failure, and the fix. */
function personText(error: unknown): string {
	const failure = error instanceof Failure ? error : new Failure("unavailable", messageOf(error));
	if (failure.kind === "arguments") return `pbot-watch: ${failure.message}`;
	return `pbot-watch is not answering (${failure.message}). If pbot-watch was moved, upgraded or removed, run \`pbot-watch pi install\` again, then /reload.`;
}

async function structured<T>(bridge: Bridge, tool: string, args: Record<string, unknown>, ctx: ExtensionContext): Promise<T> {
	const reply = await callTool(bridge, tool, args, ctx);
	if (reply.failure !== null || !reply.structured) throw new Failure(reply.failure === "arguments" ? "arguments" : "unavailable", reply.text);
	return reply.structured as T;
}

/** personal-bot's `/pbot history`: sessions or hits, then a node with its text, parents and children. */
async function showHistory(bridge: Bridge, ctx: ExtensionCommandContext, initial: string): Promise<void> {
	let query = initial;
	const search = (offset: number) =>
		structured<SearchResult>(bridge, "history_search", { ...(query ? { query } : {}), offset, limit: bridge.config.pages.historySearch }, ctx);
	if (!ctx.hasUI) {
		// Print and JSON mode: the result as JSON (Pi sends extension output to stderr there).
		try {
			console.log(JSON.stringify(await search(0), null, 2));
		} catch (error) {
			console.error(personText(error));
		}
		return;
	}
	const NEXT = "Next page";
	const AGAIN = "Search again";
	const BACK = "Back";
	let offset = 0;
	for (;;) {
		let result: SearchResult;
		try {
			result = await search(offset);
		} catch (error) {
			ctx.ui.notify(personText(error), "error");
			return;
		}
		// A hit shows the part of its text that holds the match (pbot-watch cuts it to fit the menu).
		const choices = result.matches.map((node, index) => `${offset + index + 1}. ${label(node, query ? (node.shown ?? flat(node.snippet, 60)) : undefined)}`);
		const title = `History: ${query || "recent sessions"} (${result.total})`;
		const picked = await ctx.ui.select(title, [...choices, ...(result.nextOffset === null ? [] : [NEXT]), AGAIN, BACK]);
		if (!picked || picked === BACK) return;
		if (picked === NEXT) {
			offset = result.nextOffset ?? 0;
			continue;
		}
		if (picked === AGAIN) {
			const value = await ctx.ui.input("Search history (leave empty to list sessions)", query);
			if (value !== undefined) {
				query = value.trim();
				offset = 0;
			}
			continue;
		}
		const chosen = result.matches[choices.indexOf(picked)];
		if (chosen) await showNode(bridge, ctx, chosen.id);
	}
}

async function showNode(bridge: Bridge, ctx: ExtensionCommandContext, first: string): Promise<void> {
	const TEXT = "Show text";
	const MORE_TEXT = "Next text page";
	const MORE_CHILDREN = "More children";
	const START = "Back to the start of this node";
	const BACK = "Back to the results";
	let id = first;
	let textOffset = 0;
	let childrenOffset = 0;
	const trail: string[] = []; // the nodes walked through to this one: Escape goes back to the last
	for (;;) {
		let node: NodePage;
		try {
			node = await structured<NodePage>(bridge, "history_read", { id, offset: textOffset, limit: bridge.config.pages.historyRead, childrenOffset }, ctx);
		} catch (error) {
			ctx.ui.notify(personText(error), "error");
			return;
		}
		const links = [...node.parents.map((parent) => ({ arrow: "↑ parent", node: parent })), ...node.children.map((child) => ({ arrow: "↓ child", node: child }))];
		const names = links.map((link, index) => `${index + 1}. ${link.arrow} · ${label(link.node)}`);
		const options = [
			TEXT,
			...names,
			...(node.nextOffset === null ? [] : [MORE_TEXT]),
			...(node.nextChildrenOffset === null ? [] : [MORE_CHILDREN]),
			...(textOffset || childrenOffset ? [START] : []),
			BACK,
		];
		const action = await ctx.ui.select(`${label(node)} · ${node.id}`, options);
		if (!action) {
			// Escape: one level up, to the node this one was opened from, or to the results.
			const previous = trail.pop();
			if (previous === undefined) return;
			id = previous;
			textOffset = 0;
			childrenOffset = 0;
			continue;
		}
		if (action === BACK) return;
		if (action === TEXT) {
			const end = textOffset + node.text.length;
			const text = node.text || "This summary is not written yet: open its children for the original exchanges.";
			await ctx.ui.editor(`${node.id} · text ${textOffset}-${end} of ${node.totalLength} (edits are not saved)`, text);
		} else if (action === MORE_TEXT) {
			textOffset = node.nextOffset ?? 0;
		} else if (action === MORE_CHILDREN) {
			childrenOffset = node.nextChildrenOffset ?? 0;
		} else if (action === START) {
			textOffset = 0;
			childrenOffset = 0;
		} else {
			const link = links[names.indexOf(action)];
			if (link) {
				trail.push(id);
				id = link.node.id;
				textOffset = 0;
				childrenOffset = 0;
			}
		}
	}
}

// ---- the extension -------------------------------------------------------------------------------------

function messageOf(error: unknown): string {
	return error instanceof Error ? error.message : String(error);
}

export default function pbotWatch(pi: ExtensionAPI): void {
	const config = loadConfig();
	if (config instanceof Error) {
		pi.registerCommand("history", {
			description: "Browse pbot-watch's history (not set up: see the message)",
			handler: async (_args, ctx) => {
				if (ctx.hasUI) ctx.ui.notify(config.message, "error");
				else console.error(config.message);
			},
		});
		pi.on("session_start", (_event, ctx) => {
			if (ctx.hasUI) ctx.ui.notify(config.message, "warning");
		});
		return;
	}
	const bridge = sharedBridge(config);
	registerTools(pi, bridge);
	registerCues(pi, bridge);
	registerFooter(pi, bridge);
	pi.registerCommand("history", {
		description: "Browse pbot-watch's history: recent sessions, or hits for a query; open a node, its parents and children",
		handler: async (args, ctx) => showHistory(bridge, ctx, (args ?? "").trim()),
	});
	pi.on("session_shutdown", (event) => {
		if (event.reason === "quit") bridge.close();
	});
}
