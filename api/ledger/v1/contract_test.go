package ledger

import (
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestAPIImportsNothingInternal: every package under api/ (this wire contract, the
// market vocabulary it is written in, the CRD types, the generated gRPC code) is
// usable from outside the module, so none of their files, tests included, imports a
// package under internal/, which other modules cannot import.
func TestAPIImportsNothingInternal(t *testing.T) {
	root := filepath.Join("..", "..")
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "testdata" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		checked++
		for _, imp := range f.Imports {
			p, err := strconv.Unquote(imp.Path.Value)
			if err != nil {
				return err
			}
			if p == "berth.dev/berth/internal" || strings.HasPrefix(p, "berth.dev/berth/internal/") {
				t.Errorf("%s imports %s: packages under api/ must not import internal ones", fset.Position(imp.Pos()), p)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("checked %d Go files under %s; expected the whole api/ tree", checked, root)
	}
}
