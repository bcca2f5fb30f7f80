// personal-bot 0.2.3's own cold load of a session corpus, for bench/first_run.py to set beside ours.
//
// What pbot's HistoryService.load does on a first run, minus Pi's directory listing: every
// session file is read as UTF-8, projected with projectHistory (Pi's parseSessionEntries and
// SessionManager), named with pbot's fallback, indexed with indexHistory against no previous
// record, serialised with JSON.stringify and written atomically (temporary file, fsync,
// rename), as pbot's atomic JSON writer and ours do. The history code is pbot's, extracted from
// the seed by tests/core/pbot_oracle.py; nothing of it is copied here.
//
// usage: node --experimental-transform-types pbot_load.mjs SRC SESSIONS_ROOT OUT_DIR
// prints one JSON line: {seconds, cpuSeconds, files, records, exchanges, peakRssMb, sessionListMs}
// (the figures before sessionListMs are of the load alone; the session list is timed after it)
import { closeSync, fsyncSync, mkdirSync, openSync, readdirSync, renameSync, writeSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { randomUUID } from "node:crypto";

const [dir, root, out] = process.argv.slice(2);
const { projectHistory, fallbackName } = await import(`${dir}/src/integrations/pi/history.ts`);
const { indexHistory, HistoryService } = await import(`${dir}/src/services/history/history-service.ts`);

function sessionFiles(folder) {
  const found = [];
  for (const entry of readdirSync(folder, { withFileTypes: true }).sort((a, b) => (a.name < b.name ? -1 : 1))) {
    const path = join(folder, entry.name);
    if (entry.isDirectory()) found.push(...sessionFiles(path));
    else if (entry.name.endsWith(".jsonl")) found.push(path);
  }
  return found;
}

function writeAtomic(path, text) {
  const temp = `${path}.${process.pid}.tmp`;
  const fd = openSync(temp, "w", 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(temp, path);
}

mkdirSync(out, { recursive: true });
const started = performance.now();
const cpu = process.cpuUsage();
let records = 0, exchanges = 0;
const files = sessionFiles(root);
const sessions = [];
for (const file of files) {
  const session = projectHistory(await readFile(file, { encoding: "utf8" }));
  if (!session.branches.length) continue;
  fallbackName(session);
  sessions.push(session);
  const record = indexHistory(session, undefined);
  writeAtomic(join(out, `${randomUUID()}.json`), JSON.stringify(record));
  records += 1;
  exchanges += record.nodes.filter(node => node.kind === "exchange").length;
}
const used = process.cpuUsage(cpu);

// pbot's session list (search without a query) on the loaded records, as /history opens it:
// HistoryService with the sessions above as its source and no files (nothing is written).
const service = new HistoryService(root, { list: () => [], save: () => {} }, { scan: async () => ({ sessions, warnings: [] }) });
await service.refresh({ directory: root });
const times = [];
for (let i = 0; i < 51; i++) {
  const start = performance.now();
  service.search({});
  times.push(performance.now() - start);
}
times.sort((a, b) => a - b);

process.stdout.write(JSON.stringify({
  seconds: (performance.now() - started) / 1000,
  cpuSeconds: (used.user + used.system) / 1e6,
  files: files.length,
  records,
  exchanges,
  peakRssMb: Math.round(process.resourceUsage().maxRSS / 1024),
  sessionListMs: times[Math.floor(times.length / 2)],
}) + "\n");
