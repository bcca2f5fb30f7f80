"""Write a long session with the real Pi: hundreds of tool calls, several compactions, real tools.

The memory cues are measured on what Pi really writes (``bench/cues.py --pi-session FILE``),
so this drives the real Pi 1.6 CLI (the end-to-end tests' cached install, tests/e2e/pi_install.py)
over RPC against a scripted OpenAI-compatible model on 127.0.0.1, in a project folder with the
deep absolute path a real checkout has. The model works through scripted tasks as a coding
agent does: it reads files by absolute path, edits them (Pi applies the edits), writes new
ones, and runs commands the way models run them (``cd <project> && npx vitest run ...
2>&1 | tail -n 40``). The commands really run, in bash: ``git``, ``grep`` and ``ls`` are the
real ones; ``npm`` and ``npx`` are small scripts on PATH that print what vitest, tsc and
eslint print (failing test runs with code frames, type errors, lint problems, exit codes),
failing a command's first runs and passing later ones, so there are fix-and-rerun stretches.
A compaction (Pi's own ``compact`` command, its summary from the scripted model, about the
length of a real one) follows every few tasks.

Run by hand (about 2 minutes; needs the cached Pi, or the npm registry to install it)::

    .venv/bin/python bench/pi_long_session.py --out /tmp/pi-long.jsonl
    .venv/bin/python bench/cues.py --pi-session /tmp/pi-long.jsonl

The output is deterministic in structure (tasks, calls, outcomes); ids, times and the project's
temporary path differ per run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.e2e import pi_harness
from tests.e2e.pi_install import PiInstall, ensure_pi
from tests.support.openai_server import OpenAIServer, Reply, Request, ToolCall

PROJECT = Path("home/dev/src/github.com/acme-corp/billing-platform")
MODULES = [
    "invoice",
    "budget",
    "limits",
    "tax",
    "currency",
    "ledger",
    "refunds",
    "reports",
    "payouts",
    "disputes",
]
TASK_MARK = "[[task "
SUMMARY_MARKER = "context summarization assistant"
WINDOW = 200_000

# ---- the project ---------------------------------------------------------------------------------


def module_source(name: str) -> str:
    body = [f"// {name}.ts: {name} rules of the billing platform", 'import { Money } from "./money";', ""]
    for slot in range(12):
        body += [
            f"export function {name}Rule{slot}(amount: Money): Money {{",
            f"  // slot-{name}-{slot}",
            f"  return amount.times({slot + 1});",
            "}",
            "",
        ]
    return "\n".join(body)


def test_source(name: str) -> str:
    cases = "\n".join(
        f'  it("applies rule {i}", () => expect({name}Rule{i}(money(10)).cents).toBe({(i + 1) * 1000}));'
        for i in range(12)
    )
    return f'import {{ describe, expect, it }} from "vitest";\n\ndescribe("{name}", () => {{\n{cases}\n}});\n'


FAKE_TOOL = r'''#!/usr/bin/env python3
"""What vitest, tsc and eslint print; a command's first runs fail, later ones pass."""
import hashlib, pathlib, sys
args = sys.argv[1:]
tool = pathlib.Path(sys.argv[0]).name
state = pathlib.Path.cwd() / ".bench-runs"
state.mkdir(exist_ok=True)
key = hashlib.sha1(" ".join([tool, *args]).encode()).hexdigest()[:12]
runs = state / key
n = int(runs.read_text()) if runs.exists() else 0
runs.write_text(str(n + 1))
failing = n < int(key, 16) % 3  # 0, 1 or 2 failing runs before it passes
cwd = pathlib.Path.cwd()
words = " ".join(args)
target = next((a for a in args if a.endswith((".ts", ".tsx"))), "src/billing/invoice.test.ts")
module = pathlib.Path(target).name.split(".")[0]
if tool == "npm" and args[:2] == ["run", "build"]:
    print("> billing-platform@2.3.0 build\n> tsup src/index.ts --format esm,cjs --dts\n")
    print("CLI Building entry: src/index.ts\nESM dist/index.mjs 48.20 KB\nCJS dist/index.js 49.02 KB")
    print("DTS Build success in 2131ms")
    sys.exit(0)
if "tsc" in words:
    if failing:
        print(f"src/billing/{module}.ts(41,7): error TS2322: Type 'string' is not assignable to type 'number'.")
        print(f"src/billing/{module}.ts(58,3): error TS2554: Expected 2 arguments, but got 1.")
        print("\nFound 2 errors in the same file, starting at: src/billing/" + module + ".ts:41")
        sys.exit(2)
    sys.exit(0)
if "eslint" in words:
    if failing:
        print(f"\n{cwd}/src/billing/{module}.ts")
        print("  23:9  error  'total' is assigned a value but never used  @typescript-eslint/no-unused-vars")
        print("  61:1  warning  Unexpected console statement  no-console")
        print("\n✖ 2 problems (1 error, 1 warning)\n")
        sys.exit(1)
    sys.exit(0)
# npm test / npx vitest run
print("\n> billing-platform@2.3.0 test\n> vitest run " + target + "\n")
print(f" RUN  v2.1.8 {cwd}\n")
if failing:
    print(f" ❯ {target} (12 tests | 2 failed) 41ms")
    print(f"   × {module} > applies rule 3 12ms")
    print(f"   × {module} > applies rule 7 3ms")
    print("\n⎯⎯⎯⎯⎯⎯⎯ Failed Tests 2 ⎯⎯⎯⎯⎯⎯⎯\n")
    print(f" FAIL  {target} > {module} > applies rule 3")
    print("AssertionError: expected 3000 to be 4000 // Object.is equality\n")
    print(f" ❯ {target}:7:71")
    print(f"      5|   it(\"applies rule 1\", () => expect({module}Rule1(money(10)).cents).toBe(2000));")
    print(f"      6|   it(\"applies rule 2\", () => expect({module}Rule2(money(10)).cents).toBe(3000));")
    print(f"      7|   it(\"applies rule 3\", () => expect({module}Rule3(money(10)).cents).toBe(4000));")
    print("       |                                                                       ^")
    print(f"\n FAIL  {target} > {module} > applies rule 7")
    print("AssertionError: expected 7000 to be 8000 // Object.is equality\n")
    print(" Test Files  1 failed (1)\n      Tests  2 failed | 10 passed (12)\n   Start at  10:41:07\n   Duration  1.32s")
    sys.exit(1)
print(f" ✓ {target} (12 tests) 38ms\n")
print(" Test Files  1 passed (1)\n      Tests  12 passed (12)\n   Start at  10:41:07\n   Duration  1.18s")
'''


def make_project(root: Path) -> tuple[Path, Path]:
    """The project (a git checkout) and the folder of fake tools to put first on PATH."""
    project = root / PROJECT
    billing = project / "src" / "billing"
    billing.mkdir(parents=True)
    (project / "src" / "billing" / "money.ts").write_text("export class Money { /* … */ }\n")
    for name in MODULES:
        (billing / f"{name}.ts").write_text(module_source(name))
        (billing / f"{name}.test.ts").write_text(test_source(name))
    (project / "README.md").write_text(
        "# billing-platform\n\nInvoices, budgets and limits.\n" + "Details.\n" * 30
    )
    (project / "package.json").write_text(
        json.dumps({"name": "billing-platform", "version": "2.3.0"}, indent=2)
    )
    (project / "docs").mkdir()
    (project / ".gitignore").write_text(".bench-runs/\n")
    bin_dir = root / "bin"
    bin_dir.mkdir()
    for tool in ("npm", "npx"):
        (bin_dir / tool).write_text(FAKE_TOOL)
        (bin_dir / tool).chmod(0o755)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    for key, value in (("user.name", "Dev"), ("user.email", "dev@example.invalid")):
        subprocess.run(["git", "config", key, value], cwd=project, check=True)
    subprocess.run(["git", "add", "-A"], cwd=project, check=True)
    subprocess.run(["git", "commit", "-qm", "billing platform"], cwd=project, check=True)
    return project, bin_dir


# ---- the tasks -----------------------------------------------------------------------------------


@dataclass
class Plan:
    """The tool calls of one task, in rounds (the calls of one model response)."""

    rounds: list[list[ToolCall]] = field(default_factory=list)

    def then(self, *calls: ToolCall) -> Plan:
        self.rounds.append(list(calls))
        return self


def bash(command: str) -> ToolCall:
    return ToolCall("bash", {"command": command})


def tasks(project: Path, modules: int = len(MODULES)) -> list[Plan]:
    """Scripted work: test-heavy, edit-heavy and mixed stretches over the first ``modules`` modules."""
    p = str(project)
    src = f"{p}/src/billing"
    plans: list[Plan] = []
    for index, name in enumerate(MODULES[:modules]):
        test = f"src/billing/{name}.test.ts"
        plan = Plan()
        plan.then(
            ToolCall("read", {"path": f"{src}/{name}.ts"}),
            ToolCall("read", {"path": f"{src}/{name}.test.ts"}),
        )
        plan.then(bash(f"cd {p} && npx vitest run {p}/{test} --reporter=verbose 2>&1 | tail -n 40"))
        for slot in range(4):  # an edit-heavy stretch
            plan.then(
                ToolCall(
                    "edit",
                    {
                        "path": f"{src}/{name}.ts",
                        "edits": [
                            {"oldText": f"// slot-{name}-{slot}", "newText": f"// checked: rule {slot}"}
                        ],
                    },
                )
            )
        plan.then(
            ToolCall(
                "edit",
                {"path": f"{src}/{name}.ts", "edits": [{"oldText": "// no such line", "newText": "x"}]},
            )
        )
        for _ in range(3):  # a test-heavy stretch: fix, rerun until it passes, then once more
            plan.then(bash(f"cd {p} && npx vitest run {p}/{test} --reporter=verbose 2>&1 | tail -n 40"))
        plan.then(bash(f"cd {p} && npx tsc --noEmit -p tsconfig.json src/billing/{name}.ts"))
        plan.then(bash(f"cd {p} && npx tsc --noEmit -p tsconfig.json src/billing/{name}.ts"))
        plan.then(bash(f"cd {p} && npx eslint {src}/{name}.ts --max-warnings 0"))
        plan.then(bash(f"cd {p} && npx eslint {src}/{name}.ts --max-warnings 0"))
        for _ in range(6):  # the same check again and again, as agents do
            plan.then(bash(f"cd {p} && npm test -- {test}"))
        plan.then(bash(f"grep -rn '{name}Rule' {src} | wc -l"))
        plan.then(bash(f"grep -rn 'checked: rule' {src}/{name}.ts | head -n 20"))
        plan.then(bash(f"cd {p} && git status --short"))
        plan.then(bash(f"cd {p} && git diff --stat"))
        plan.then(
            ToolCall(
                "write",
                {
                    "path": f"{p}/docs/{name}.md",
                    "content": f"# {name}\n\n" + f"Rule notes for {name}.\n" * (5 + index),
                },
            )
        )
        plan.then(bash(f"ls -la {p}/docs"))
        plan.then(
            bash(
                f'cd {p} && git add -A && git commit -qm "billing: check the {name} rules" && git log --oneline -3'
            )
        )
        plan.then(bash(f"cd {p} && npm run build 2>&1 | tail -n 20"))
        plans.append(plan)
    return plans


SUMMARY = textwrap.dedent(
    """\
    ## Goal
    Check every rule of the billing platform's modules against its tests, fix what fails, and
    document each module's rules in docs/.

    ## Constraints & Preferences
    - Keep the public function names (`<module>Rule<n>`); tests pin their results.
    - Run vitest per file, tsc and eslint with zero warnings before committing.
    - One commit per module, message "billing: check the <module> rules".

    ## Progress
    ### Done
    - [x] Read each module and its test file before changing it.
    - [x] Marked the checked rules in the sources (the slot comments) one by one.
    - [x] Re-ran the failing vitest files until they passed; fixed the type errors tsc reported.
    - [x] Fixed the lint errors eslint reported (unused variables).
    - [x] Wrote docs/<module>.md for the modules done so far, and committed each.

    ### In Progress
    - [ ] The next module in the list, in the same order of steps.

    ### Blocked
    - An edit whose old text was not in the file failed; the file was read again first.

    ## Key Decisions
    - **Rule results are multiples of the amount**: the tests expect `amount × (n + 1)`.
    - **Docs per module**: one short file per module under docs/, linked from the README later.
    - **Builds with tsup**: `npm run build` must succeed before each commit.

    ## Next Steps
    1. Read the next module and its tests.
    2. Run its tests, fix the failures, run tsc and eslint.
    3. Write its docs page and commit.
    4. Build once more at the end and check `git status` is clean.

    ## Critical Context
    - Vitest reports failures as `FAIL <file> > <suite> > <test>` with an AssertionError line.
    - tsc errors are `src/billing/<module>.ts(line,col): error TSxxxx: ...`.
    - eslint runs with `--max-warnings 0`, so a warning fails the run as well.
    - The project lives in the checkout under ~/src/github.com/acme-corp/billing-platform.
    """
)


@dataclass
class Script:
    """The scripted model: the next round of the task the last prompt names, then an answer."""

    plans: list[Plan]

    def __call__(self, request: Request) -> Reply:
        messages = request.messages
        system = "\n".join(
            str(m.get("content")) for m in messages if m.get("role") in ("system", "developer")
        )
        if SUMMARY_MARKER in system:
            return Reply.answer(SUMMARY)
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
        prompt = request.user_text
        if TASK_MARK not in prompt:
            return Reply.answer("Noted.")
        number = int(prompt.split(TASK_MARK, 1)[1].split("]]", 1)[0])
        rounds = sum(1 for m in messages[last_user:] if m.get("role") == "assistant" and m.get("tool_calls"))
        plan = self.plans[number]
        if rounds >= len(plan.rounds):
            return Reply.answer(f"Task {number} is done: the module is checked, documented and committed.")
        calls = [
            ToolCall(c.name, c.arguments, id=f"call_{request.index}_{i}")
            for i, c in enumerate(plan.rounds[rounds])
        ]
        return Reply.tools(*calls, text="Next step.")


def drive(
    out: Path,
    per_batch: int,
    modules: int = len(MODULES),
    pi: PiInstall | None = None,
    keep_recent: int = 4000,
) -> dict[str, Any]:
    """Run the scripted tasks in the real Pi, compacting every ``per_batch`` tasks; copy the session to ``out``."""
    pi = pi or ensure_pi(os.environ)
    with tempfile.TemporaryDirectory(prefix="pi-long-") as temp, OpenAIServer() as server:
        root = Path(temp)
        project, bin_dir = make_project(root)
        plans = tasks(project, modules)
        server.handler = Script(plans)
        world = pi_harness.PiWorld.create(pi, root / "pi", server.base_url, os.environ)
        models = pi_harness.models_json(server.base_url)
        models["providers"][pi_harness.PROVIDER]["models"][0]["contextWindow"] = WINDOW
        (world.agent_dir / "models.json").write_text(json.dumps(models, indent=2))
        settings = {"compaction": {"enabled": True, "reserveTokens": 16384, "keepRecentTokens": keep_recent}}
        (world.agent_dir / "settings.json").write_text(json.dumps(settings, indent=2))
        world.env["PATH"] = f"{bin_dir}{os.pathsep}{world.env['PATH']}"
        compactions = 0
        with world.rpc(project) as rpc:
            for number in range(len(plans)):
                rpc.prompt(f"Check the next module. {TASK_MARK}{number}]]", timeout=300)
                if (number + 1) % per_batch == 0:
                    rpc.command({"type": "compact"}, timeout=300)
                    compactions += 1
            rpc.prompt("Thanks, that is all for today.")
            rpc.close()
        session = pi_harness.newest_session(world.sessions)
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(session, out)
    entries = [json.loads(line) for line in out.read_text().splitlines() if line.strip()]
    calls = sum(1 for e in entries if e.get("type") == "message" and e["message"].get("role") == "toolResult")
    return {
        "file": str(out),
        "bytes": out.stat().st_size,
        "entries": len(entries),
        "tool results": calls,
        "compactions": compactions,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "pi-long-session.jsonl")
    parser.add_argument("--per-batch", type=int, default=2, help="tasks between compactions")
    parser.add_argument("--modules", type=int, default=len(MODULES), help="tasks (one per module)")
    args = parser.parse_args()
    print(json.dumps(drive(args.out, args.per_batch, args.modules)))


if __name__ == "__main__":
    main()
