// The statements of the library, read from every module of src/ with the
// TypeScript compiler's parser (a devDependency), and the check that none
// depends on the session's search_path (SECURITY.md): every function of
// PostgreSQL's written pg_catalog.name(...), every operator
// OPERATOR(pg_catalog.op), every type whose name is not an SQL keyword
// pg_catalog.type, every object of leaderlock @extschema@.name. Used by
// statements.test.mjs (no server) and by the tour (tour.mjs), which says
// which constants it did not reach.
import { readdirSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { fileURLToPath } from "node:url";

const require = createRequire(import.meta.url);
const SRC = fileURLToPath(new URL("../src/", import.meta.url));

/** Every module of the library: file name -> source. */
function sources() {
  return new Map(readdirSync(SRC).filter((f) => f.endsWith(".ts")).sort().map((f) => [f, readFileSync(SRC + f, "utf8")]));
}

/** What a statement starts with (a string literal of the library that is SQL). */
const SQL_START = /^\s*(SELECT|WITH|LISTEN|UNLISTEN|BEGIN|COMMIT|ROLLBACK|SET|SHOW|INSERT|UPDATE|DELETE)\b/;

/**
 * Every SQL text of the library: { name, text, file, line }, `name` the
 * constant it is (null for one written inline, as in bounded(c, by,
 * "BEGIN")). A constant is a string literal, or literals joined by `+`; a
 * template literal's substitutions read as `x`. `source`: a text to read
 * instead of the modules.
 */
export function statements(source) {
  const modules = source === undefined ? sources() : new Map([["source.ts", source]]);
  return [...modules].flatMap(([name, text]) => statementsOf(name, text));
}

function statementsOf(fileName, source) {
  const ts = require("typescript");
  const file = ts.createSourceFile(fileName, source, ts.ScriptTarget.ES2022, true);
  const found = [];
  const textOf = (node) => {
    if (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node)) return node.text;
    if (ts.isTemplateExpression(node)) return node.head.text + node.templateSpans.map((s) => "x" + s.literal.text).join("");
    if (ts.isParenthesizedExpression(node)) return textOf(node.expression);
    if (ts.isBinaryExpression(node) && node.operatorToken.kind === ts.SyntaxKind.PlusToken) {
      const l = textOf(node.left);
      const r = textOf(node.right);
      return l === null || r === null ? null : l + r;
    }
    return null;
  };
  const visit = (node, name) => {
    const text = textOf(node);
    if (text !== null && (ts.isStringLiteral(node) || ts.isNoSubstitutionTemplateLiteral(node) ||
                          ts.isTemplateExpression(node) || ts.isBinaryExpression(node))) {
      if (SQL_START.test(text)) {
        found.push({ name, text, file: fileName, line: file.getLineAndCharacterOfPosition(node.getStart()).line + 1 });
      }
      return; // its parts are not statements of their own
    }
    if (ts.isVariableDeclaration(node) && node.initializer && ts.isIdentifier(node.name)) {
      return visit(node.initializer, node.name.text);
    }
    ts.forEachChild(node, (child) => visit(child, null));
  };
  visit(file, null);
  return found;
}

/** The named statements of the library: name -> text (a name given two texts, in two modules, is an error). */
export function constants(source) {
  const named = new Map();
  for (const s of statements(source).filter((s) => s.name)) {
    if (named.has(s.name) && named.get(s.name) !== s.text) throw new Error(`two statements named ${s.name} (${s.file}:${s.line})`);
    named.set(s.name, s.text);
  }
  return named;
}

// `name(` that is grammar, not a function looked up on the path.
const GRAMMAR = new Set(["select", "from", "where", "and", "or", "not", "as", "on", "join", "when", "then", "else",
                         "by", "coalesce", "exists", "extract", "greatest", "least", "array", "row", "values", "any",
                         "lateral", "case", "filter", "over"]);
// Type names that are SQL keywords (resolved to pg_catalog by the grammar).
const KEYWORD_TYPES = new Set(["bigint", "boolean", "integer", "int", "smallint", "interval", "numeric", "real",
                               "double", "decimal"]);
// Words that hide an operator looked up on the path.
const HIDDEN = /\b(IN|LIKE|ILIKE|SIMILAR|BETWEEN|NULLIF|DISTINCT|OVERLAPS)\b/i;

/**
 * What in `text` depends on the search_path: a list of findings (empty:
 * none). String literals are left out; LISTEN and UNLISTEN name channels.
 */
export function unqualified(text) {
  const problems = [];
  if (/^\s*(UN)?LISTEN\b/i.test(text)) return problems;
  let s = text.replace(/'(?:[^']|'')*'/g, "''");
  // quoted identifiers are column names here ("position")
  s = s.replace(/"(?:[^"]|"")*"/g, "col");
  s = s.replace(/OPERATOR\(pg_catalog\.[^)\s]+\)/g, " ");
  for (const m of s.matchAll(/([A-Za-z_][A-Za-z0-9_$]*)\s*\(/g)) {
    const before = s.slice(0, m.index);
    if (/(pg_catalog|@extschema@)\.$/.test(before)) continue;
    if (/OPERATOR$/.test(before.trimEnd()) || GRAMMAR.has(m[1].toLowerCase())) continue;
    problems.push(`function ${m[1]}( not qualified`);
  }
  for (const m of s.matchAll(/::\s*([A-Za-z_][A-Za-z0-9_]*)(\s*\.\s*[A-Za-z_][A-Za-z0-9_]*)?/g)) {
    if (m[2] ? m[1] !== "pg_catalog" : !KEYWORD_TYPES.has(m[1].toLowerCase())) problems.push(`type ::${m[1]}${m[2] ?? ""} not qualified`);
  }
  for (const m of s.matchAll(/\b(le_[A-Za-z0-9_]*|leaderlock[A-Za-z0-9_]*)\b/g)) {
    if (!/@extschema@\.$/.test(s.slice(0, m.index))) problems.push(`${m[1]} not in @extschema@`);
  }
  const bare = s.replace(/@extschema@\./g, "").replace(/pg_catalog\./g, "").replace(/::/g, " ").replace(/=>/g, " ")
    .replace(/\$[0-9]+/g, " ");
  for (const m of bare.matchAll(/[-+*/<>=~!@#%^&|`?]+/g)) problems.push(`operator ${m[0]} not OPERATOR(pg_catalog.${m[0]})`);
  const hidden = HIDDEN.exec(s);
  if (hidden) problems.push(`${hidden[1]} hides an operator`);
  if (/\bCASE\s+(?!WHEN\b)/i.test(s)) problems.push("a simple CASE compares with =");
  return problems;
}
