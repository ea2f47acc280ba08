import { z } from "zod";

// zod compiles a schema's parser with `new Function` unless told not to, and probes for it as a
// schema is built (zod/v4/core/schemas.js: `jit = !globalConfig.jitless`, util.js `allowsEval`):
// the page's CSP allows no eval, and even the caught probe is a violation the console reports. This
// module is main.tsx's first import, so that it runs before any schema of the contract is built.
z.config({ jitless: true });
