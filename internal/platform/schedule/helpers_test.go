package schedule

import (
	"os"
	"strings"
	"testing"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/testing/gittest"
)

// projectRoot is the repository root of this project (the tests run in internal/platform/schedule).
const projectRoot = "../../.."

func gitTry(dir string, args ...string) (string, error) { return gittest.Try(dir, args...) }

func gitOut(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return gittest.Run(t, dir, args...)
}

// projectFiles reads base/, components/, overlays/ and clusters/ of the project.
func projectFiles(t testing.TB) map[string]string {
	t.Helper()
	return gittest.ReadTree(t, projectRoot, "base", "components", "overlays", "clusters")
}

// commentedScaling is overlays/prod/scaling.yaml with comments next to the qwen field.
func commentedScaling(t testing.TB, files map[string]string) {
	t.Helper()
	const old = "spec:\n  minReplicaCount: 2\n  maxReplicaCount: 8\n"
	const repl = "spec:\n  # floor outside peaks; clusters/prod/schedule.yaml raises it\n  minReplicaCount: 2 # keep >= 2 in prod\n  maxReplicaCount: 8\n"
	s := files["overlays/prod/scaling.yaml"]
	if !strings.Contains(s, old) {
		t.Fatal("overlays/prod/scaling.yaml changed: update the test")
	}
	files["overlays/prod/scaling.yaml"] = strings.Replace(s, old, repl, 1)
}

// newBare creates dir/name.git whose main branch has one commit with files.
func newBare(t testing.TB, files map[string]string) string {
	t.Helper()
	return gittest.NewBare(t, t.TempDir(), "repo.git", files)
}

func writeFiles(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	gittest.WriteFiles(t, dir, files)
}

func clone(t testing.TB, bare string) string { t.Helper(); return gittest.Clone(t, bare) }

func fsck(t testing.TB, repo string) { t.Helper(); gittest.Fsck(t, repo) }

func fileRemote(t testing.TB, bare string) *gitrepo.Remote {
	t.Helper()
	r, err := gitrepo.NewRemote(gitrepo.RemoteConfig{URL: "file://" + bare})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// headSnapshot reads main of the bare repository.
func headSnapshot(t testing.TB, bare string) *gitrepo.Snapshot {
	t.Helper()
	repo, err := gitrepo.Open("file://" + bare)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := repo.Snapshot("main")
	if err != nil {
		t.Fatal(err)
	}
	return snap
}

func loadProd(t testing.TB, bare string) *Schedule {
	t.Helper()
	s, err := Load(headSnapshot(t, bare), "prod")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func osReadFile(p string) ([]byte, error) { return os.ReadFile(p) }
