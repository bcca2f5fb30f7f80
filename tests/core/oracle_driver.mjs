// Runs personal-bot 0.2.3's own history code (extracted from the seed at test time, never
// copied into the repo) on the inputs Python hands over, so tests can compare records.
// stdin: one JSON job per line {content: base64, recordId, previous?}, or {op: "service", root,
// directory, files, organize, agentDir?} to run pbot's HistoryService on a workspace as a Pi
// start does; stdout: one result per line.
import { createInterface } from "node:readline";
import { join } from "node:path";

const dir = process.argv[2];
const { projectHistory, fallbackName } = await import(`${dir}/src/integrations/pi/history.ts`);
const { PiHistory } = await import(`${dir}/src/integrations/pi/history.ts`);
const { indexHistory, HistoryService } = await import(`${dir}/src/services/history/history-service.ts`);
const { HistoryFiles } = await import(`${dir}/src/storage/history-files.ts`);
const { writes } = await import(`${dir}/src/storage/atomic-json.js`);

// What pbot.ts wires for a workspace: its own folder, Pi's sessions, the old user-level folder.
async function service(job) {
  writes.length = 0;
  const legacy = job.agentDir ? new HistoryFiles(join(job.agentDir, "pbot/history")) : undefined;
  const history = new HistoryService(job.root, new HistoryFiles(join(job.root, ".pi/pbot/history")),
    new PiHistory(job.root, () => job.files), legacy);
  await history.refresh({ directory: job.directory });
  if (job.organize)
    await history.organize(async text => `pbot summary of ${text.length} chars`, new AbortController().signal);
  await history.close();
  return { writes: [...writes], warnings: history.warnings };
}

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  const job = JSON.parse(line);
  let out;
  try {
    if (job.op === "service") {
      out = await service(job);
      process.stdout.write(JSON.stringify(out) + "\n");
      continue;
    }
    const session = projectHistory(Buffer.from(job.content, "base64").toString("utf8"));
    if (!session.branches.length) out = { record: null };
    else {
      fallbackName(session);
      const previous = job.previous ?? { id: job.recordId, sessionId: session.sessionId, name: "", nodes: [] };
      out = { record: indexHistory(session, previous) };
    }
  } catch (error) {
    out = { error: String(error) };
  }
  process.stdout.write(JSON.stringify(out) + "\n");
}
