// Runs personal-bot 0.2.3's own history code (extracted from the seed at test time, never
// copied into the repo) on the inputs Python hands over, so tests can compare records.
// stdin: one JSON job per line {content: base64, recordId, previous?}; stdout: one result per line.
import { createInterface } from "node:readline";

const dir = process.argv[2];
const { projectHistory, fallbackName } = await import(`${dir}/src/integrations/pi/history.ts`);
const { indexHistory } = await import(`${dir}/src/services/history/history-service.ts`);

const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
for await (const line of lines) {
  if (!line.trim()) continue;
  const job = JSON.parse(line);
  let out;
  try {
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
