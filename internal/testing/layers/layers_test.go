// Package layers keeps the tree's layering: the engine (what any Argo CD user needs) imports
// nothing above it, this platform's tools import the engine, the daemon imports both, and the
// commands sit on top. Production code imports no test harness.
package layers

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const module = "github.com/llm-gitops/platform/"

// root is the repository root, from this package's directory.
const root = "../../.."

// layer is where a package stands; a package may import its own layer and those below.
type layer struct {
	name string
	rank int // higher imports lower; harnesses have none
}

var (
	engine   = layer{"engine", 1}
	platform = layer{"platform", 2}
	daemon   = layer{"daemon", 3}
	command  = layer{"cmd", 4}
	harness  = layer{"test harness", 0}
)

// layerOf says the layer of a package path relative to the module, and false for one outside
// every layer (a new top-level directory under internal/ must choose one).
func layerOf(pkg string) (layer, bool) {
	switch {
	case strings.HasPrefix(pkg, "internal/engine/"):
		return engine, true
	case strings.HasPrefix(pkg, "internal/platform/"):
		return platform, true
	case pkg == "internal/daemon" || strings.HasPrefix(pkg, "internal/daemon/"):
		if strings.HasSuffix(pkg, "test") { // notifytest and the like: fakes for tests
			return harness, true
		}
		return daemon, true
	case strings.HasPrefix(pkg, "cmd/"):
		return command, true
	case strings.HasPrefix(pkg, "internal/testing/"), pkg == "internal/e2e", pkg == "internal/doccheck":
		return harness, true
	}
	return layer{}, false
}

// below lists, inside the daemon's layer, packages that must not import the ones named: the
// message type sits below the notifier, the outbox and the sinks that share it.
var below = map[string][]string{
	"internal/daemon/message": {"internal/daemon/notify", "internal/daemon/outbox", "internal/daemon/sinks"},
	"internal/daemon/sinks":   {"internal/daemon/notify", "internal/daemon/outbox"},
	"internal/daemon/outbox":  {"internal/daemon/notify"},
}

// imports maps each package of the module (relative path) to the module packages its non-test
// files import, each with the file that does.
func imports(t *testing.T) map[string]map[string]string {
	t.Helper()
	out := map[string]map[string]string{}
	for _, top := range []string{"internal", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, top), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				if d.Name() == "testdata" {
					return filepath.SkipDir
				}
				return nil
			}
			if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return nil
			}
			rel, err := filepath.Rel(root, path)
			if err != nil {
				return err
			}
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
			if err != nil {
				return fmt.Errorf("parse %s: %w", rel, err)
			}
			pkg := filepath.ToSlash(filepath.Dir(rel))
			if out[pkg] == nil {
				out[pkg] = map[string]string{}
			}
			for _, spec := range f.Imports {
				p, _ := strconv.Unquote(spec.Path.Value)
				if dep, ok := strings.CutPrefix(p, module); ok {
					out[pkg][dep] = filepath.ToSlash(rel)
				}
			}
			return nil
		})
		require.NoError(t, err)
	}
	require.NotEmpty(t, out["internal/engine/audit"], "the walk found the engine's audit package")
	return out
}

func TestEveryPackageHasALayer(t *testing.T) {
	var none []string
	for pkg := range imports(t) {
		if _, ok := layerOf(pkg); !ok {
			none = append(none, pkg)
		}
	}
	slices.Sort(none)
	assert.Empty(t, none, "packages outside internal/engine, internal/platform, internal/daemon, internal/testing and cmd: CONTRIBUTING.md says which to choose")
}

func TestImportsPointDown(t *testing.T) {
	var wrong []string
	for pkg, deps := range imports(t) {
		from, ok := layerOf(pkg)
		if !ok || from == harness {
			continue
		}
		for dep, file := range deps {
			to, ok := layerOf(dep)
			switch {
			case !ok:
				continue // reported by TestEveryPackageHasALayer
			case to == harness:
				wrong = append(wrong, fmt.Sprintf("%s imports the test harness %s", file, dep))
			case to.rank > from.rank:
				wrong = append(wrong, fmt.Sprintf("%s imports %s: the %s may not import the %s above it", file, dep, from.name, to.name))
			case slices.Contains(below[pkg], dep):
				wrong = append(wrong, fmt.Sprintf("%s imports %s, which sits above it", file, dep))
			}
		}
	}
	slices.Sort(wrong)
	assert.Empty(t, wrong)
}

func TestLayerOf(t *testing.T) {
	for pkg, want := range map[string]layer{
		"internal/engine/audit":             engine,
		"internal/platform/check":           platform,
		"internal/daemon":                   daemon,
		"internal/daemon/message":           daemon,
		"internal/daemon/notify/notifytest": harness,
		"internal/testing/testcluster":      harness,
		"cmd/auditor":                       command,
	} {
		got, ok := layerOf(pkg)
		assert.True(t, ok, pkg)
		assert.Equal(t, want, got, pkg)
	}
	_, ok := layerOf("internal/somewhere")
	assert.False(t, ok, "a package outside the layers has none")
}
