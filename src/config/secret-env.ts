/*
 * Which environment variables hold secrets, by name: the one rule launcher keeps where a value
 * must not be written out (the Kubernetes export puts such a variable in a Secret). A name is
 * split into its words at `_`: a secret is named by a word that says so (HF_TOKEN,
 * HUGGING_FACE_HUB_TOKEN, AWS_SECRET_ACCESS_KEY, WANDB_API_KEY, DB_PASSWORD), never by a word that
 * only contains one (PRACTICE_KV_TOKENS counts tokens).
 */

const SECRET_WORDS: ReadonlySet<string> = new Set(["TOKEN", "SECRET", "PASSWORD", "PASSWD", "CREDENTIAL", "CREDENTIALS", "APIKEY"]);
/** KEY is a secret only after one of these (API_KEY, ACCESS_KEY): CACHE_KEY names no secret. */
const KEY_AFTER: ReadonlySet<string> = new Set(["API", "ACCESS", "PRIVATE", "AUTH", "SIGNING"]);

/** Whether the variable `name` holds a secret, by its name alone. */
export function isSecretEnvName(name: string): boolean {
  const words = name.toUpperCase().split("_");
  return words.some((w, i) => SECRET_WORDS.has(w) || (w === "KEY" && i > 0 && KEY_AFTER.has(words[i - 1] as string)));
}
