package config_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Every key the parser accepts is documented in docs/config.md: the test
// reads the keys from the p.mapping calls in config.go, so a new key fails
// it until the document names it.
func TestConfigDocumentsEveryKey(t *testing.T) {
	doc, err := os.ReadFile("../docs/config.md")
	if err != nil {
		t.Fatal(err)
	}
	f, err := parser.ParseFile(token.NewFileSet(), "config.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		if sel, ok := call.Fun.(*ast.SelectorExpr); !ok || sel.Sel.Name != "mapping" {
			return true
		}
		for _, a := range call.Args[1:] {
			if lit, ok := a.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				k, _ := strconv.Unquote(lit.Value)
				keys = append(keys, k)
			}
		}
		return true
	})
	if len(keys) < 15 {
		t.Fatalf("found only %d keys in config.go's mapping calls: %v", len(keys), keys)
	}
	for _, k := range keys {
		if !strings.Contains(string(doc), "| `"+k+"` |") {
			t.Errorf("docs/config.md has no table row for key %q", k)
		}
	}
}
