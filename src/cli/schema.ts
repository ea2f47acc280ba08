import type { Command } from "commander";
import * as z from "zod";
import { clusterFileSchema } from "../cluster/schema.js";
import { recipeJsonSchema } from "../recipe/schema.js";
import { UserError } from "../config/errors.js";
import type { Output } from "../app/output.js";

export function schemaFor(kind: string): Record<string, unknown> {
  if (kind === "recipe") return recipeJsonSchema();
  if (kind === "cluster") return z.toJSONSchema(clusterFileSchema, { target: "draft-7", io: "input" }) as Record<string, unknown>;
  throw new UserError(`unknown schema ${JSON.stringify(kind)}`, "use `launcher schema recipe` or `launcher schema cluster`");
}

export function registerSchema(program: Command, io: Output): void {
  program
    .command("schema")
    .description("print the JSON Schema of recipe.toml (or cluster.toml) for editors such as taplo")
    .argument("[kind]", "recipe or cluster", "recipe")
    .action((kind: string) => io.json(schemaFor(kind)));
}
