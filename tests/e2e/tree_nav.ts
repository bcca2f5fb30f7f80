// Pi extension loaded by the end-to-end test with `-e`: RPC mode has no command that moves the
// session's leaf inside the same file (what `/tree` does interactively), so this registers one.
//
//   /e2e-nav <entryId> [summarize]   -> ctx.navigateTree(entryId, { summarize })
//
// The outcome is reported as a notify UI request (an `extension_ui_request` record on RPC
// stdout), `e2e-nav ok <leafId>` or `e2e-nav failed: <reason>`, so the test can wait for it
// without anything test-only being written into the session file.

export default function (pi: any) {
	pi.registerCommand("e2e-nav", {
		description: "move the session leaf to an entry (end-to-end test)",
		handler: async (args: string, ctx: any) => {
			const words = (args || "").trim().split(/\s+/).filter(Boolean);
			const target = words[0];
			try {
				await ctx.waitForIdle();
				const result = await ctx.navigateTree(target, { summarize: words.includes("summarize") });
				if (result?.cancelled) {
					ctx.ui.notify("e2e-nav failed: cancelled", "error");
					return;
				}
				ctx.ui.notify(`e2e-nav ok ${ctx.sessionManager.getLeafId()}`, "info");
			} catch (error: any) {
				ctx.ui.notify(`e2e-nav failed: ${error?.message ?? error}`, "error");
			}
		},
	});
}
