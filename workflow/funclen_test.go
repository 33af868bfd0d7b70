package workflow_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// maxFuncLines is the longest a function of the shipping code may be,
// from its func line to its closing brace (issue #28 item 5).
const maxFuncLines = 100

// longFuncs are the functions still over maxFuncLines, each with the
// length it may not exceed, until they are split (they are being
// rewritten for the typed event log, issue #28 item 1). Do not add to it.
var longFuncs = map[string]int{
	"projector/report/fold.go (*fold).add":         146,
	"workflow/run_call_task.go (*call).pollTask":   134,
	"cmd/agentctl/progress.go (*progress).observe": 110,
	"workflow/resume_log.go (*runLog).fold":        103,
}

// TestFunctionsShort: no function of the module's shipping code (tests
// and generated peers aside) is over maxFuncLines.
func TestFunctionsShort(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	files := 0
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules" || d.Name() == "testdata") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		rel, _ := filepath.Rel(root, p)
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := fset.Position(fd.End()).Line - fset.Position(fd.Pos()).Line + 1
			name := filepath.ToSlash(rel) + " " + funcName(fd)
			limit, listed := longFuncs[name]
			if !listed {
				limit = maxFuncLines
			}
			if n > limit {
				t.Errorf("%s is %d lines, over %d: split it", name, n, limit)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files under %s: is the walk reading the module?", files, root)
	}
}

// funcName is fd's name, with its receiver type: (*fold).add.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	var recv func(ast.Expr) string
	recv = func(e ast.Expr) string {
		switch x := e.(type) {
		case *ast.StarExpr:
			return "*" + recv(x.X)
		case *ast.IndexExpr:
			return recv(x.X)
		case *ast.IndexListExpr:
			return recv(x.X)
		case *ast.Ident:
			return x.Name
		}
		return "?"
	}
	return "(" + recv(fd.Recv.List[0].Type) + ")." + fd.Name.Name
}
