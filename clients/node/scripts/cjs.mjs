// dist/cjs holds CommonJS: tell Node so inside a "type": "module" package.
import { writeFileSync } from "node:fs";
writeFileSync(new URL("../dist/cjs/package.json", import.meta.url), '{ "type": "commonjs" }\n');
