// Every pair's Dolos similarity, as JSON lines: node pairs.mjs LIST.json
// LIST.json: {"files": [paths], "ignore": path or null}. Dolos's own defaults otherwise
// (k-grams of 23 tree-sitter tokens, windows of 17), Python named so no file is left out.
import { readFileSync } from "node:fs";
import { Dolos } from "@dodona/dolos-lib";

const list = JSON.parse(readFileSync(process.argv[2], "utf8"));
const dolos = new Dolos({ language: "python" });
const report = await dolos.analyzePaths(list.files, list.ignore ?? undefined);
for (const pair of report.allPairs()) {
  console.log(JSON.stringify({ a: pair.leftFile.path, b: pair.rightFile.path, similarity: pair.similarity }));
}
