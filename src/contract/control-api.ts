/**
 * Where the daemon's control API lives (src/daemon/protocol.ts has its routes): beside the OpenAI
 * routes under /v1, never mixed with them, so the gateway can hand it over before it looks at an
 * inference key.
 */
export const CONTROL_PREFIX = "/launcher/v1/";
