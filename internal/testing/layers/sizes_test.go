package layers

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The sizes CONTRIBUTING.md asks of non-test code: a file read in one sitting, a command's file
// shorter still, and only a few functions longer than a screen.
const (
	maxFileLines     = 400
	maxCommandLines  = 200
	longFuncLines    = 80
	maxLongFunctions = 10
)

// sourceFile is one non-test Go file of the module, parsed.
type sourceFile struct {
	rel  string
	fset *token.FileSet
	file *ast.File
}

// sources parses every non-test Go file under internal/ and cmd/ (harnesses too: they are read
// like the rest), testdata left out.
func sources(t *testing.T) []sourceFile {
	t.Helper()
	var out []sourceFile
	for _, top := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && d.Name() == "testdata" {
				return filepath.SkipDir
			}
			if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				return fmt.Errorf("parse %s: %w", rel, err)
			}
			out = append(out, sourceFile{rel: filepath.ToSlash(rel), fset: fset, file: f})
			return nil
		})
		require.NoError(t, err)
	}
	require.NotEmpty(t, out)
	return out
}

func TestFilesFitTheirLimits(t *testing.T) {
	var over []string
	for _, s := range sources(t) {
		lines := s.fset.Position(s.file.End()).Line
		limit := maxFileLines
		if strings.HasPrefix(s.rel, "cmd/auditor/") {
			limit = maxCommandLines
		}
		if lines > limit {
			over = append(over, fmt.Sprintf("%s: %d lines (at most %d)", s.rel, lines, limit))
		}
	}
	slices.Sort(over)
	assert.Empty(t, over, "split these files by what they hold")
}

func TestFewLongFunctions(t *testing.T) {
	var long []string
	for _, s := range sources(t) {
		for _, d := range s.file.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			if n := s.fset.Position(fd.End()).Line - s.fset.Position(fd.Pos()).Line + 1; n > longFuncLines {
				long = append(long, fmt.Sprintf("%s: %s, %d lines", s.rel, fd.Name.Name, n))
			}
		}
	}
	slices.Sort(long)
	assert.LessOrEqual(t, len(long), maxLongFunctions, "functions over %d lines:\n%s", longFuncLines, strings.Join(long, "\n"))
}
