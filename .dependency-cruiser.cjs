/**
 * The map of src/: each folder does one job and has a rank, and a folder imports only folders of a
 * lower rank (or itself). Folders on one line share a rank and may not import each other.
 * src/README.md says what each one does. Checked by `npm run check:layers` (part of `npm test`).
 */
const RANKS = [
  ["config"],
  ["contract", "cluster"],
  ["engine", "remote"],
  ["recipe"],
  ["plan", "memory"],
  ["store", "export"],
  ["nodes"],
  ["transfer", "claims"],
  ["boot"],
  ["lanes", "supervise", "measure", "setup"],
  ["app"],
  ["gateway"],
  ["daemon"],
  ["cli"],
];
/** Narrower than its rank: the gateway serves traffic and must not reach the deploy machinery. */
const ONLY = { gateway: ["config", "contract", "store"] };

const rankOf = new Map(RANKS.flatMap((folders, rank) => folders.map((f) => [f, rank])));
const notBelow = (folder) => [...rankOf].filter(([f, r]) => f !== folder && r >= rankOf.get(folder)).map(([f]) => f);
const folderPath = (folders) => `^src/(${folders.join("|")})/`;

const layerRules = [...rankOf.keys()].flatMap((folder) => {
  const upOrSideways = notBelow(folder);
  return upOrSideways.length === 0 ? [] : [{
    name: `${folder}-imports-only-lower-ranks`,
    comment: `src/${folder}/ (rank ${rankOf.get(folder)}) may import only folders of a lower rank: see src/README.md`,
    severity: "error",
    from: { path: `^src/${folder}/` },
    to: { path: folderPath(upOrSideways) },
  }];
});
const onlyRules = Object.entries(ONLY).map(([folder, allowed]) => ({
  name: `${folder}-imports-only-${allowed.join("-")}`,
  comment: `src/${folder}/ may import only ${allowed.map((f) => `src/${f}/`).join(", ")}`,
  severity: "error",
  from: { path: `^src/${folder}/` },
  to: { path: "^src/", pathNot: [folderPath([folder, ...allowed])] },
}));
const unknownFolder = {
  name: "every-folder-has-a-rank",
  comment: "a module outside the folders in .dependency-cruiser.cjs's RANKS (in a new folder, or loose in src/) has no place on the map: put it in a folder, or add the folder there and to src/README.md",
  severity: "error",
  from: { path: "^src/", pathNot: folderPath([...rankOf.keys()]) },
  to: {},
};

module.exports = {
  forbidden: [
    ...layerRules,
    ...onlyRules,
    unknownFolder,
    { name: "no-circular", comment: "modules that import each other cannot be read or tested alone", severity: "error", from: { path: "^src/" }, to: { circular: true } },
    { name: "not-to-test", comment: "src/ never imports test code", severity: "error", from: { path: "^src/" }, to: { path: "^test/" } },
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    includeOnly: "^src/",
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { extensions: [".ts", ".js"] },
  },
};
