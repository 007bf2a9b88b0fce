package leaderlock

// No statement depends on the session's search_path (schema.go): every
// statement constant writes PostgreSQL's functions, types and operators
// in pg_catalog and leaderlock's objects in @extschema@; every one is in
// `statements`; none is sent but through the substitution of the
// extension's schema; no SQL is written outside the constants. No server
// needed.

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var (
	reLiteral    = regexp.MustCompile(`'(?:[^']|'')*'`)
	reQuotedName = regexp.MustCompile(`"(?:[^"]|"")*"`)
	reOperator   = regexp.MustCompile(`(?i)OPERATOR\(\s*pg_catalog\s*\.\s*[^)\s]+\s*\)`)
	reCall       = regexp.MustCompile(`([A-Za-z_@][\w@]*(?:\.[A-Za-z_][\w]*)*)\s*\(`)
	reCast       = regexp.MustCompile(`(?i)::\s*([\w@]+(?:\.\w+)?(?:\s+precision)?)`)
	reExtract    = regexp.MustCompile(`(?i)\bextract\(\s*\w+\s+FROM\b`)
	reFromJoin   = regexp.MustCompile(`(?i)\b(?:FROM|JOIN)\s+([^\s(]+)`)
	reWord       = regexp.MustCompile(`[@\w.]*\w`)
	reSymbol     = regexp.MustCompile(`[=<>!~+\-*/%|&^#@?]`)
	reCaseSimple = regexp.MustCompile(`(?i)\bCASE\s+(\S+)`)
	// a name of leaderlock's or of pg_catalog's, left unqualified
	reBareName = regexp.MustCompile(`(?i)(^|[^\w.@])((?:le_|leaderlock|pg_)\w*)`)
)

// Grammar that looks like a call: keywords followed by a parenthesis, and
// the expressions the grammar resolves in pg_catalog itself.
var callWords = map[string]bool{"coalesce": true, "exists": true, "extract": true, "greatest": true, "least": true,
	"array": true, "row": true, "values": true, "any": true, "operator": true, "select": true, "from": true,
	"where": true, "and": true, "or": true, "not": true, "on": true, "then": true, "when": true, "else": true,
	"as": true, "join": true}

// Types the grammar names (keywords): resolved in pg_catalog whatever the path.
var keywordTypes = map[string]bool{"boolean": true, "bigint": true, "integer": true, "int": true, "smallint": true,
	"interval": true, "double precision": true, "numeric": true, "real": true, "float": true, "timestamp": true}

// Constructs that hide an operator (=, ~~) that the path would resolve.
var hiddenOperators = map[string]bool{"in": true, "like": true, "ilike": true, "similar": true, "between": true,
	"distinct": true, "nullif": true, "overlaps": true}

// pathProblems lists what in stmt the search_path would resolve.
func pathProblems(stmt string) []string {
	var problems []string
	add := func(format string, args ...string) {
		for _, a := range args {
			format = strings.Replace(format, "%s", a, 1)
		}
		problems = append(problems, format)
	}
	s := reLiteral.ReplaceAllString(stmt, " L ")
	s = reQuotedName.ReplaceAllString(s, " Q ")
	for _, m := range reCast.FindAllStringSubmatch(s, -1) {
		t := strings.ToLower(strings.Join(strings.Fields(m[1]), " "))
		if !strings.HasPrefix(t, "pg_catalog.") && !strings.HasPrefix(t, "@extschema@.") && !keywordTypes[t] {
			add("type %s not in pg_catalog", m[1])
		}
	}
	s = reCast.ReplaceAllString(s, " ")
	for _, m := range reCall.FindAllStringSubmatch(s, -1) {
		name := m[1]
		if strings.Contains(name, ".") {
			if !strings.HasPrefix(name, "pg_catalog.") && !strings.HasPrefix(name, "@extschema@.") {
				add("call %s( in a schema neither pg_catalog nor @extschema@", name)
			}
		} else if !callWords[strings.ToLower(name)] {
			add("unqualified call %s(", name)
		}
	}
	s = reExtract.ReplaceAllString(s, "extract(")
	for _, m := range reFromJoin.FindAllStringSubmatch(s, -1) {
		if !strings.HasPrefix(m[1], "pg_catalog.") && !strings.HasPrefix(m[1], "@extschema@.") {
			add("relation %s unqualified", m[1])
		}
	}
	for _, m := range reBareName.FindAllStringSubmatch(s, -1) {
		name := strings.ToLower(m[2])
		if name != "pg_catalog" && !regexp.MustCompile(`(?i)\bLISTEN\s+`+name+`\b`).MatchString(s) {
			add("name %s unqualified", m[2])
		}
	}
	for _, m := range reCaseSimple.FindAllStringSubmatch(s, -1) {
		if !strings.EqualFold(m[1], "WHEN") {
			add("simple CASE %s WHEN (an = on the path)", m[1])
		}
	}
	for _, w := range reWord.FindAllString(s, -1) {
		if hiddenOperators[strings.ToLower(w)] {
			add("%s hides an operator", w)
		}
	}
	s = reOperator.ReplaceAllString(s, " ")
	s = strings.NewReplacer("=>", " ", "@extschema@", " ", "(*)", " ", "UNLISTEN *", " ").Replace(s)
	if m := reSymbol.FindAllString(s, -1); len(m) > 0 {
		add("operator %s not written OPERATOR(pg_catalog.…)", strings.Join(m, " "))
	}
	return problems
}

func TestNoStatementDependsOnTheSearchPath(t *testing.T) {
	names := make([]string, 0, len(statements))
	for name := range statements {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if p := pathProblems(statements[name]); len(p) > 0 {
			t.Errorf("%s: %s\n\t%s", name, strings.Join(p, "; "), statements[name])
		}
	}
}

// The check finds what it is for.
func TestTheSearchPathCheckFindsCarelessStatements(t *testing.T) {
	for _, stmt := range []string{
		"SELECT make_interval(secs => $1)",
		"SELECT pg_catalog.count(*) FROM leaderlock",
		"SELECT pg_catalog.count(*) FROM public.leaderlock",
		"SELECT count(*) FROM @extschema@.leaderlock",
		"SELECT 1 FROM @extschema@.leaderlock WHERE key = $1",
		"SELECT $1::text",
		"SELECT $1::uuid",
		"SELECT (@extschema@.le_capabilities()->>'worker')::boolean",
		"SELECT @extschema@.le_leader(key => $1) || 'x'",
		"SELECT le_leader(key => $1)",
		"SELECT @extschema@.le_leader(key => $1) IN ('a', 'b')",
		"SELECT CASE @extschema@.le_leader(key => $1) WHEN 'a' THEN 1 END",
		"SELECT @extschema@.le_leader(key => $1) LIKE 'a%'",
		"SELECT nullif(@extschema@.le_leader(key => $1), 'a')",
		"SELECT 1 FROM @extschema@.leaderlock l, leaderlock_runs r",
		"SELECT 1 FROM pg_extension",
	} {
		if len(pathProblems(stmt)) == 0 {
			t.Errorf("found nothing in %s", stmt)
		}
	}
}

// Every statement constant (sql*) is in statements; no SQL outside them;
// a constant is sent only through the substitution (x.sql, e.call and
// the functions that use it) or, without the placeholder, sent().
func TestEveryStatementIsAConstantSentThroughTheSubstitution(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	declared := map[string]bool{}
	sql := regexp.MustCompile(`^[\x60"]\s*(SELECT|LISTEN|UNLISTEN|NOTIFY|INSERT|UPDATE|DELETE|WITH|SET|BEGIN)\b`)
	substituting := map[string]bool{"sql": true, "call": true, "scanBool": true, "callNamed": true}
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		var stack []ast.Node
		ast.Inspect(f, func(n ast.Node) bool {
			if n == nil {
				stack = stack[:len(stack)-1]
				return true
			}
			var parent ast.Node
			if len(stack) > 0 {
				parent = stack[len(stack)-1]
			}
			stack = append(stack, n)
			inConst := false
			for _, a := range stack {
				if g, ok := a.(*ast.GenDecl); ok && g.Tok == token.CONST {
					inConst = true
				}
			}
			switch n := n.(type) {
			case *ast.ValueSpec:
				for _, id := range n.Names {
					if inConst && strings.HasPrefix(id.Name, "sql") && !strings.HasPrefix(id.Name, "sqlstate") {
						declared[id.Name] = true
					}
				}
			case *ast.BasicLit:
				if n.Kind == token.STRING && !inConst && sql.MatchString(n.Value) {
					t.Errorf("%s: SQL outside the statement constants: %s", fset.Position(n.Pos()), n.Value)
				}
			case *ast.Ident:
				if !strings.HasPrefix(n.Name, "sql") || strings.HasPrefix(n.Name, "sqlstate") || inConst {
					return true
				}
				if _, isConst := statements[n.Name]; !isConst {
					return true
				}
				switch p := parent.(type) {
				case *ast.KeyValueExpr: // the statements map, callNamed's legacy map
					return true
				case *ast.BinaryExpr: // callNamed: which statement it was given
					return true
				case *ast.CallExpr:
					fn := ""
					switch f := p.Fun.(type) {
					case *ast.Ident:
						fn = f.Name
					case *ast.SelectorExpr:
						fn = f.Sel.Name
					}
					if substituting[fn] {
						return true
					}
					if fn == "sent" && !strings.Contains(statements[n.Name], extSchemaPlaceholder) {
						return true
					}
				}
				t.Errorf("%s: %s sent without the extension's schema put in", fset.Position(n.Pos()), n.Name)
			}
			return true
		})
	}
	for name := range declared {
		if _, ok := statements[name]; !ok {
			t.Errorf("%s is not in statements", name)
		}
	}
	for name := range statements {
		if !declared[name] {
			t.Errorf("statements names %s, no constant", name)
		}
	}
}
