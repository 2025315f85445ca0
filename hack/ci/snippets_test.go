// Package ci tests the CI snippets of docs/ci as the forges run them: the GitHub Actions workflow
// and the GitLab CI job, each against a pull request that breaks a production rule and one that
// passes, with a local forge API that records the comments.
package ci

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/llm-gitops/platform/internal/gittest"
)

const (
	prNumber = "7"
	token    = "t0ken-for-the-test"
	// runbook is the file the failing pull request deletes: an alert of the monitoring base links it.
	runbook = "docs/runbooks/GPUIdle.md"
)

// forge is a GitHub or GitLab comments API: it lists, creates and updates the comments of one pull
// request, and refuses a request without the token.
type forge struct {
	t        *testing.T
	mu       sync.Mutex
	comments []comment
	auth     func(*http.Request) bool
}

type comment struct {
	ID   int    `json:"id"`
	Body string `json:"body"`
}

func (f *forge) snapshot() []comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]comment(nil), f.comments...)
}

// serve handles list (GET collection), create (POST collection) and update (PATCH or PUT item).
func (f *forge) serve(collection, item string, update string) *httptest.Server {
	itemRE := regexp.MustCompile("^" + regexp.QuoteMeta(item) + `(\d+)$`)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !f.auth(r) {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		var in comment
		switch {
		case r.URL.Path == collection && r.Method == http.MethodGet:
			_ = json.NewEncoder(w).Encode(append([]comment{}, f.comments...)) // [] when there are none, as the forges answer
		case r.URL.Path == collection && r.Method == http.MethodPost:
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			in.ID = 100 + len(f.comments)
			f.comments = append(f.comments, in)
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(in)
		case itemRE.MatchString(r.URL.Path) && r.Method == update:
			id, _ := strconv.Atoi(itemRE.FindStringSubmatch(r.URL.Path)[1])
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			for i := range f.comments {
				if f.comments[i].ID == id {
					f.comments[i].Body = in.Body
					_ = json.NewEncoder(w).Encode(f.comments[i])
					return
				}
			}
			http.NotFound(w, r)
		default:
			f.t.Errorf("unexpected forge request %s %s", r.Method, r.URL.Path)
			http.NotFound(w, r)
		}
	}))
}

// pullRequest is a clone of the repository as a forge checks it out for a pull request: origin has
// main (this repository's work tree, committed), HEAD is the pull request's branch.
type pullRequest struct {
	dir    string
	origin string
}

// newRepository clones this repository (prod and staging are pinned to commits of its history)
// and commits its work tree (tracked and untracked files, not ignored ones) on main of a bare
// origin.
func newRepository(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("../..")
	require.NoError(t, err)
	list, err := exec.Command("git", "-C", root, "ls-files", "-z", "-co", "--exclude-standard").Output()
	require.NoError(t, err)
	seed := filepath.Join(t.TempDir(), "seed")
	gittest.Run(t, root, "clone", "-q", root, seed)
	gittest.Run(t, seed, "checkout", "-q", "-B", "main")
	gittest.Run(t, seed, "rm", "-rqf", ".")
	for _, p := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		src := filepath.Join(root, p)
		info, err := os.Lstat(src)
		if err != nil || !info.Mode().IsRegular() {
			continue // deleted in the work tree, or a symlink
		}
		b, err := os.ReadFile(src)
		require.NoError(t, err)
		dst := filepath.Join(seed, p)
		require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
		require.NoError(t, os.WriteFile(dst, b, info.Mode().Perm()))
	}
	gittest.Run(t, seed, "add", "-A")
	gittest.Run(t, seed, "commit", "-q", "--allow-empty", "-m", "the work tree")
	origin := filepath.Join(t.TempDir(), "origin.git")
	gittest.Run(t, seed, "clone", "-q", "--bare", seed, origin)
	return origin
}

// open clones origin and commits change on a pull request branch.
func open(t *testing.T, origin string, change func(dir string)) pullRequest {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "pr")
	gittest.Run(t, filepath.Dir(origin), "clone", "-q", origin, dir)
	gittest.Run(t, dir, "checkout", "-q", "-b", "change")
	change(dir)
	gittest.Run(t, dir, "commit", "-q", "--allow-empty", "-am", "the change under review")
	return pullRequest{dir: dir, origin: origin}
}

// push adds a commit to the pull request.
func (p pullRequest) push(t *testing.T, change func(dir string)) {
	t.Helper()
	change(p.dir)
	gittest.Run(t, p.dir, "add", "-A")
	gittest.Run(t, p.dir, "commit", "-q", "-m", "a fix")
}

// toolEnv is the environment a job runs in: this machine's Go and its caches (a job's runner has
// its own), a clean Git configuration with an identity, and vars.
func toolEnv(t *testing.T, home string, vars map[string]string) []string {
	t.Helper()
	env := gittest.Env(home)
	for _, k := range []string{"GOCACHE", "GOMODCACHE", "GOPATH"} {
		out, err := exec.Command("go", "env", k).Output()
		require.NoError(t, err)
		env = append(env, k+"="+strings.TrimSpace(string(out)))
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	return env
}

// runShell runs script in dir as `bash ARGS FILE`, the way a forge runs a step, and returns its
// exit code and output.
func runShell(t *testing.T, dir string, env []string, args []string, script string) (int, string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "step.sh")
	require.NoError(t, os.WriteFile(file, []byte(script), 0o755))
	cmd := exec.Command("bash", append(args, file)...)
	cmd.Dir = dir
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		var exit *exec.ExitError
		require.ErrorAs(t, err, &exit, "running the step: %s", out)
		return exit.ExitCode(), string(out)
	}
	return 0, string(out)
}

// workflow is the part of a GitHub Actions workflow the test runs.
type workflow struct {
	On          any               `yaml:"on"`
	Permissions map[string]string `yaml:"permissions"`
	Jobs        map[string]struct {
		Steps []struct {
			Name string            `yaml:"name"`
			Uses string            `yaml:"uses"`
			With map[string]string `yaml:"with"`
			Env  map[string]string `yaml:"env"`
			Run  string            `yaml:"run"`
		} `yaml:"steps"`
	} `yaml:"jobs"`
}

var expression = regexp.MustCompile(`\$\{\{\s*([^}]+?)\s*\}\}`)

// githubJob returns the workflow's run step with its environment, after checking that every other
// step is one the test does itself: a full checkout (origin/main must be there) and Go.
func githubJob(t *testing.T, context map[string]string) (script string, env map[string]string) {
	t.Helper()
	b, err := os.ReadFile("../../docs/ci/github-actions.yml")
	require.NoError(t, err)
	var w workflow
	require.NoError(t, yaml.Unmarshal(b, &w))
	assert.Equal(t, "pull_request", w.On)
	assert.Equal(t, "write", w.Permissions["pull-requests"], "the token must be allowed to comment")
	require.Len(t, w.Jobs, 1)
	for _, job := range w.Jobs {
		for _, s := range job.Steps {
			switch {
			case strings.HasPrefix(s.Uses, "actions/checkout@"):
				assert.Equal(t, "0", s.With["fetch-depth"], "the check needs the target branch's history")
			case strings.HasPrefix(s.Uses, "actions/setup-go@"):
				assert.Equal(t, goVersion(t), s.With["go-version"], "the Go of go.mod")
			case s.Run != "":
				require.Empty(t, script, "one run step")
				script, env = s.Run, map[string]string{}
				for k, v := range s.Env {
					env[k] = expression.ReplaceAllStringFunc(v, func(e string) string {
						name := expression.FindStringSubmatch(e)[1]
						val, ok := context[name]
						require.True(t, ok, "the test has no value for ${{ %s }}", name)
						return val
					})
				}
			default:
				t.Fatalf("a step the test does not run: %+v", s)
			}
		}
	}
	require.NotEmpty(t, script)
	return script, env
}

// gitlabJob returns the job's script lines and its variables expanded against predefined.
func gitlabJob(t *testing.T, predefined map[string]string) (script []string, vars map[string]string) {
	t.Helper()
	b, err := os.ReadFile("../../docs/ci/gitlab-ci.yml")
	require.NoError(t, err)
	var jobs map[string]struct {
		Image     string              `yaml:"image"`
		Rules     []map[string]string `yaml:"rules"`
		Variables map[string]string   `yaml:"variables"`
		Before    []string            `yaml:"before_script"`
		Script    []string            `yaml:"script"`
	}
	require.NoError(t, yaml.Unmarshal(b, &jobs))
	require.Len(t, jobs, 1)
	for _, j := range jobs {
		require.Len(t, j.Rules, 1)
		assert.Contains(t, j.Rules[0]["if"], `"merge_request_event"`, "the job runs for merge requests")
		assert.Equal(t, "0", j.Variables["GIT_DEPTH"], "the check needs the target branch's history")
		assert.Equal(t, "go"+goVersion(t), j.Variables["GOTOOLCHAIN"])
		// before_script installs jq in the image; this machine has it.
		_, err := exec.LookPath("jq")
		require.NoError(t, err, "the script needs jq")
		vars = map[string]string{}
		for k, v := range j.Variables {
			vars[k] = os.Expand(v, func(name string) string { return predefined[name] })
		}
		return j.Script, vars
	}
	return nil, nil
}

var build struct {
	once sync.Once
	path string
	err  error
}

func TestMain(m *testing.M) {
	code := m.Run()
	if build.path != "" {
		_ = os.RemoveAll(filepath.Dir(build.path))
	}
	os.Exit(code)
}

// builtAuditor builds this work tree's auditor once for the package's tests.
func builtAuditor(t *testing.T) string {
	t.Helper()
	build.once.Do(func() {
		dir, err := os.MkdirTemp("", "auditor-ci-")
		if err != nil {
			build.err = err
			return
		}
		build.path = filepath.Join(dir, "auditor")
		cmd := exec.Command("go", "build", "-trimpath", "-o", build.path, "./cmd/auditor")
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			build.err = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	require.NoError(t, build.err)
	return build.path
}

func goVersion(t *testing.T) string {
	b, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(b)
	require.NotNil(t, m)
	return string(m[1])
}

func deleteRunbook(t *testing.T) func(string) {
	return func(dir string) { gittest.Run(t, dir, "rm", "-q", runbook) }
}

func restoreRunbook(t *testing.T) func(string) {
	return func(dir string) { gittest.Run(t, dir, "checkout", "-q", "origin/main", "--", runbook) }
}

// reviewCycle is one pull request's life under the job run: a change that deletes a runbook an
// alert links fails and posts one comment; another failing push updates that comment; the fix
// passes and turns the same comment into a pass. It returns the pull request.
func reviewCycle(t *testing.T, f *forge, origin string, run func(pullRequest) (int, string)) pullRequest {
	t.Helper()
	pr := open(t, origin, deleteRunbook(t))
	t.Run("a violation fails the job and posts one comment", func(t *testing.T) {
		code, out := run(pr)
		require.Equal(t, 1, code, out)
		got := f.snapshot()
		require.Len(t, got, 1)
		assert.Contains(t, got[0].Body, "alert-runbook")
		assert.Contains(t, got[0].Body, runbook)
	})
	t.Run("another failing push updates the same comment", func(t *testing.T) {
		pr.push(t, func(dir string) { gittest.WriteFiles(t, dir, map[string]string{"NOTES.txt": "x\n"}) })
		code, out := run(pr)
		require.Equal(t, 1, code, out)
		require.Len(t, f.snapshot(), 1)
	})
	t.Run("the fix passes and updates the comment", func(t *testing.T) {
		pr.push(t, restoreRunbook(t))
		code, out := run(pr)
		require.Equal(t, 0, code, out)
		got := f.snapshot()
		require.Len(t, got, 1)
		assert.NotContains(t, got[0].Body, "alert-runbook")
		assert.True(t, strings.HasPrefix(got[0].Body, "<!-- auditor-check -->"), got[0].Body)
	})
	return pr
}

// TestGitHubActionsFailsAViolatingPullRequestAndCommentsOnce runs the workflow's step as Actions
// does (`bash -e FILE`, the default shell) on a pull request: a change that passes posts nothing;
// one that deletes a runbook an alert links fails the job and posts one comment; fixing it passes
// and updates that same comment. The first run builds the auditor from the target branch, as the
// snippet does by default; the others reuse that build through AUDITOR.
func TestGitHubActionsFailsAViolatingPullRequestAndCommentsOnce(t *testing.T) {
	origin := newRepository(t)
	f := &forge{t: t, auth: func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+token }}
	srv := f.serve("/repos/llm/platform/issues/"+prNumber+"/comments", "/repos/llm/platform/issues/comments/", http.MethodPatch)
	defer srv.Close()
	script, stepEnv := githubJob(t, map[string]string{
		"github.base_ref":                  "main",
		"github.event.pull_request.number": prNumber,
		"secrets.GITHUB_TOKEN":             token,
	})
	runner := map[string]string{"GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_API_URL": srv.URL, "GITHUB_REPOSITORY": "llm/platform"}
	for k, v := range stepEnv {
		runner[k] = v
	}
	home := t.TempDir()
	run := func(p pullRequest) (int, string) {
		return runShell(t, p.dir, toolEnv(t, home, runner), []string{"-e"}, script)
	}

	t.Run("a passing change posts nothing", func(t *testing.T) {
		pr := open(t, origin, func(string) {})
		code, out := run(pr)
		require.Equal(t, 0, code, out)
		assert.Contains(t, out, "building the auditor from origin/main")
		assert.Empty(t, f.snapshot())
	})

	auditor := builtAuditor(t)
	runner["AUDITOR"] = auditor

	reviewCycle(t, f, origin, run)
	t.Run("a failed post keeps the check's exit code", func(t *testing.T) {
		runner["GITHUB_TOKEN"] = "wrong"
		defer func() { runner["GITHUB_TOKEN"] = token }()
		pr := open(t, origin, deleteRunbook(t))
		code, out := run(pr)
		require.Equal(t, 1, code, out)
		assert.Contains(t, out, "the report could not be posted")
	})
}

// TestGitLabCIFailsAViolatingMergeRequestAndNotesOnce runs the job's script lines as GitLab's
// bash shell does (`set -eo pipefail`), with its variables, against the notes API.
func TestGitLabCIFailsAViolatingMergeRequestAndNotesOnce(t *testing.T) {
	origin := newRepository(t)
	f := &forge{t: t, auth: func(r *http.Request) bool { return r.Header.Get("PRIVATE-TOKEN") == token }}
	notes := "/api/v4/projects/42/merge_requests/3/notes"
	srv := f.serve(notes, notes+"/", http.MethodPut)
	defer srv.Close()
	predefined := map[string]string{
		"GITLAB_CI": "true", "CI": "true", "CI_API_V4_URL": srv.URL + "/api/v4", "CI_PROJECT_ID": "42",
		"CI_MERGE_REQUEST_IID": "3", "CI_PIPELINE_SOURCE": "merge_request_event",
		"CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main", "AUDITOR_GITLAB_TOKEN": token,
	}
	script, vars := gitlabJob(t, predefined)
	for k, v := range predefined {
		vars[k] = v
	}
	auditor := builtAuditor(t)
	vars["AUDITOR"] = auditor
	home := t.TempDir()
	run := func(p pullRequest) (int, string) {
		return runShell(t, p.dir, toolEnv(t, home, vars), []string{"-eo", "pipefail"}, strings.Join(script, "\n")+"\n")
	}

	pr := reviewCycle(t, f, origin, run)
	t.Run("a check that cannot run is exit 2 and posts nothing", func(t *testing.T) {
		vars["BASE_REF"] = "no-such-branch"
		defer func() { vars["BASE_REF"] = "main" }()
		code, out := run(pr)
		assert.Equal(t, 2, code, out)
		assert.Contains(t, out, "cannot fetch the target branch no-such-branch")
		require.Len(t, f.snapshot(), 1)
	})
}
