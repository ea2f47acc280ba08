/**
 * `npm run test:rig`'s global setup and teardown (node --test-global-setup, Node 24: a module whose
 * globalSetup runs once before the first file and globalTeardown once after the last, in the
 * runner's own process; doc/api/test.md, "Global setup and teardown"). The files share one practice
 * cluster and one archive of the practice image there (LAUNCHER_RIG_REUSE=1, see practiceSuite and
 * rigUp), so the last file leaves them: the teardown removes them, whatever the files did.
 *
 * The runner loads this module without `--import tsx`'s hooks (Node strips its types itself), so
 * the helper, whose imports name `.js` for `.ts`, is loaded through tsx's own API (tsx 4,
 * docs "tsImport"), keeping RIG_DIR and the archive's path in one place.
 */
import { rmSync } from "node:fs";
import { tsImport } from "tsx/esm/api";

async function removeAll(): Promise<void> {
  const { IMAGE_ARCHIVE, rigDown } = (await tsImport("./integration/practice-cluster.ts", import.meta.url)) as typeof import("./integration/practice-cluster.js");
  rigDown();
  rmSync(IMAGE_ARCHIVE, { force: true });
  rmSync(`${IMAGE_ARCHIVE}.part`, { force: true });
}

/** A rig or an archive left by a run that was killed is not this run's: start from neither. */
export const globalSetup = removeAll;
export const globalTeardown = removeAll;
