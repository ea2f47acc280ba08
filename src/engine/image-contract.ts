import type { ArgparseDump } from "./argparse-dump.js";

/** What launcher reads of an engine image, once per image ID (the store caches it by ID). */
export interface ImageFacts {
  /** The image's ENTRYPOINT (`docker image inspect`, .Config.Entrypoint); null when it has none. */
  readonly entrypoint: readonly string[] | null;
  /** The engine version the image reports; null when it could not be read. */
  readonly version: string | null;
  /** The image's own argument parser (ImageContract.parserCommand), when it could be read. */
  readonly parser?: ArgparseDump;
  /** Why the image could not describe its parser (no Python, an engine too old), when it could not. */
  readonly parserUnread?: string;
  /** Which dump program read it (a hash): another program's reading is read again. */
  readonly parserProgram?: string;
}

/** How a deployment uses the image: the parts of a recipe the image must fit. */
export interface ImageUse {
  readonly backend: "mp" | "ray";
  /** The recipe's `entrypoint`, which replaces the image's. */
  readonly entrypoint?: readonly string[];
}

/** Something the image must have for one use, checked in preflight by running `argv` in it. */
export interface ImageProbe {
  /** Run in the image, its first word replacing the ENTRYPOINT; exit 0 means the image has it. */
  readonly argv: readonly string[];
  /** What is wrong, and the fix, when the probe fails. */
  readonly problem: (image: string) => string;
}

/** What an engine requires of its image, and how to ask an image for its version. */
export interface ImageContract {
  /** Run in the image (its first word replacing the ENTRYPOINT) to print the engine's version. */
  readonly versionCommand: readonly string[];
  /**
   * Run in the image (its first word replacing the ENTRYPOINT) to print its argument parser as
   * src/engine/argparse-dump.ts reads it: no GPU, no network, no engine started.
   */
  readonly parserCommand?: readonly string[];
  /** The version in what `versionCommand` printed, or null. */
  parseVersion(output: string): string | null;
  /** What is wrong with this image for this use, each naming the image and its version; [] when fine. */
  problems(image: string, facts: ImageFacts, use: ImageUse): string[];
  /** What else this use needs inside the image (a program), asked of the image each time. */
  probes?(use: ImageUse): readonly ImageProbe[];
}
