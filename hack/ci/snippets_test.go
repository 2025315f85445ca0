// Package ci tests the CI snippets of docs/ci as the forges run them: the GitHub Actions workflow
// and the GitLab CI job, each against a pull request that breaks a production rule and one that
// passes, with a local forge API that records the comments.
package ci

import (
	"encoding/json"
	"fmt"
	"maps"
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
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gopkg.in/yaml.v3"

	"github.com/llm-gitops/platform/internal/testing/gittest"
)

const (
	prNumber = "7"
	token    = "t0ken-for-the-test"
	marker   = "<!-- auditor-check -->"
	// runbook is the file the failing pull request deletes: an alert of the monitoring base links it.
	runbook = "docs/runbooks/GPUIdle.md"
	// actionsBot posts the comments of GITHUB_TOKEN; gitlabBot is the user of a project access token.
	actionsBot = "github-actions[bot]"
	gitlabBot  = "project_42_bot"
)

// forge is a GitHub or GitLab comments API: it lists (page by page), creates and updates the
// comments of one pull request, and answers who the token's user is. Like the forges, it refuses
// a request without the token, an update of a comment someone else wrote and a body over the
// forge's limit.
type forge struct {
	t        *testing.T
	mu       sync.Mutex
	comments []comment
	auth     func(*http.Request) bool
	github   bool   // GitHub's JSON and Link header; otherwise GitLab's JSON and X-Next-Page
	user     string // what GET /user answers; "" is a 403, as GitHub answers GITHUB_TOKEN
	poster   string // the author of the comments the token posts
	pageSize int    // the most comments one page holds, whatever per_page asks
	maxBody  int    // in characters; a longer body is refused with 422
}

type comment struct {
	ID     int
	Body   string
	Author string
}

// newGitHub serves GitHub's issue comments API as GITHUB_TOKEN sees it.
func newGitHub(t *testing.T) (*forge, *httptest.Server) {
	f := &forge{t: t, github: true, poster: actionsBot, pageSize: 100, maxBody: 65536,
		auth: func(r *http.Request) bool { return r.Header.Get("Authorization") == "Bearer "+token }}
	srv := f.serve("/repos/llm/platform/issues/"+prNumber+"/comments", "/repos/llm/platform/issues/comments/", "/user", http.MethodPatch)
	t.Cleanup(srv.Close)
	return f, srv
}

// newGitLab serves GitLab's merge request notes API to a project access token.
func newGitLab(t *testing.T) (*forge, *httptest.Server) {
	f := &forge{t: t, user: gitlabBot, poster: gitlabBot, pageSize: 100, maxBody: 1000000,
		auth: func(r *http.Request) bool { return r.Header.Get("PRIVATE-TOKEN") == token }}
	notes := "/api/v4/projects/42/merge_requests/3/notes"
	srv := f.serve(notes, notes+"/", "/api/v4/user", http.MethodPut)
	t.Cleanup(srv.Close)
	return f, srv
}

func (f *forge) snapshot() []comment {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]comment(nil), f.comments...)
}

// encode is a comment as the forge's API writes it.
func (f *forge) encode(c comment) map[string]any {
	if f.github {
		return map[string]any{"id": c.ID, "body": c.Body, "user": map[string]string{"login": c.Author}}
	}
	return map[string]any{"id": c.ID, "body": c.Body, "author": map[string]string{"username": c.Author}, "system": false}
}

// page writes one page of the comments, with the header that says whether another follows.
func (f *forge) page(w http.ResponseWriter, r *http.Request) {
	n, err := strconv.Atoi(r.URL.Query().Get("page"))
	if err != nil || n < 1 {
		n = 1
	}
	per, err := strconv.Atoi(r.URL.Query().Get("per_page"))
	if err != nil || per < 1 {
		per = 20
	}
	per = min(per, f.pageSize, 100)
	from := min((n-1)*per, len(f.comments))
	to := min(from+per, len(f.comments))
	more := to < len(f.comments)
	link := func(p int) string {
		return fmt.Sprintf("<http://%s%s?per_page=%d&page=%d>", r.Host, r.URL.Path, per, p)
	}
	switch {
	case f.github && more:
		w.Header().Set("Link", link(n+1)+`; rel="next", `+link((len(f.comments)+per-1)/per)+`; rel="last"`)
	case f.github && n > 1:
		w.Header().Set("Link", link(n-1)+`; rel="prev", `+link(1)+`; rel="first"`)
	case more:
		w.Header().Set("X-Next-Page", strconv.Itoa(n+1))
	case !f.github:
		w.Header().Set("X-Next-Page", "") // GitLab sends it empty on the last page
	}
	out := []map[string]any{} // [] when there are none, as the forges answer
	for _, c := range f.comments[from:to] {
		out = append(out, f.encode(c))
	}
	_ = json.NewEncoder(w).Encode(out)
}

// serve handles list (GET collection), create (POST collection), update (PATCH or PUT item) and
// the token's user (GET user).
func (f *forge) serve(collection, item, user, update string) *httptest.Server {
	itemRE := regexp.MustCompile("^" + regexp.QuoteMeta(item) + `(\d+)$`)
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !f.auth(r) {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		f.mu.Lock()
		defer f.mu.Unlock()
		var in struct {
			Body string `json:"body"`
		}
		decode := func() bool {
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return false
			}
			if n := utf8.RuneCountInString(in.Body); n > f.maxBody {
				http.Error(w, fmt.Sprintf("body is too long (%d characters, maximum is %d)", n, f.maxBody), http.StatusUnprocessableEntity)
				return false
			}
			return true
		}
		switch {
		case r.URL.Path == user && r.Method == http.MethodGet:
			switch {
			case f.user == "":
				http.Error(w, `{"message": "Resource not accessible by integration"}`, http.StatusForbidden)
			case f.github:
				_ = json.NewEncoder(w).Encode(map[string]string{"login": f.user})
			default:
				_ = json.NewEncoder(w).Encode(map[string]string{"username": f.user})
			}
		case r.URL.Path == collection && r.Method == http.MethodGet:
			f.page(w, r)
		case r.URL.Path == collection && r.Method == http.MethodPost:
			if !decode() {
				return
			}
			c := comment{ID: 100 + len(f.comments), Body: in.Body, Author: f.poster}
			f.comments = append(f.comments, c)
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(f.encode(c))
		case itemRE.MatchString(r.URL.Path) && r.Method == update:
			id, _ := strconv.Atoi(itemRE.FindStringSubmatch(r.URL.Path)[1])
			for i := range f.comments {
				if f.comments[i].ID != id {
					continue
				}
				if f.comments[i].Author != f.poster {
					http.Error(w, "forbidden: not the author", http.StatusForbidden)
					return
				}
				if !decode() {
					return
				}
				f.comments[i].Body = in.Body
				_ = json.NewEncoder(w).Encode(f.encode(f.comments[i]))
				return
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
	Concurrency struct {
		Group            string `yaml:"group"`
		CancelInProgress bool   `yaml:"cancel-in-progress"`
	} `yaml:"concurrency"`
	Jobs map[string]struct {
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
	assert.Contains(t, w.Concurrency.Group, "github.event.pull_request.number", "one run per pull request at a time")
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
		Resource  string              `yaml:"resource_group"`
		Before    []string            `yaml:"before_script"`
		Script    []string            `yaml:"script"`
	}
	require.NoError(t, yaml.Unmarshal(b, &jobs))
	require.Len(t, jobs, 1)
	for _, j := range jobs {
		require.Len(t, j.Rules, 1)
		assert.Contains(t, j.Rules[0]["if"], `"merge_request_event"`, "the job runs for merge requests")
		assert.Equal(t, "0", j.Variables["GIT_DEPTH"], "the check needs the target branch's history")
		assert.Contains(t, j.Resource, "$CI_MERGE_REQUEST_IID", "one job per merge request at a time")
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
		assert.True(t, strings.HasPrefix(got[0].Body, marker), got[0].Body)
	})
	return pr
}

// editedGate: a pull request that breaks a rule and rewrites check-pr.sh to pass still fails,
// since the job runs the target branch's copy of the script.
func editedGate(t *testing.T, origin string, run func(pullRequest) (int, string)) {
	t.Run("the pull request's own check-pr.sh does not judge it", func(t *testing.T) {
		pr := open(t, origin, func(dir string) {
			deleteRunbook(t)(dir)
			gittest.WriteFiles(t, dir, map[string]string{"hack/ci/check-pr.sh": "#!/usr/bin/env bash\necho the edited gate\nexit 0\n"})
		})
		code, out := run(pr)
		require.Equal(t, 1, code, out)
		assert.NotContains(t, out, "the edited gate")
		assert.Contains(t, out, "alert-runbook")
	})
}

// fakeAuditor is an auditor that prints report as its markdown and exits with code: the cases
// about the comment alone need no real check.
func fakeAuditor(t *testing.T, report string, code int) string {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "report.md")
	require.NoError(t, os.WriteFile(file, []byte(report), 0o644))
	path := filepath.Join(dir, "auditor")
	require.NoError(t, os.WriteFile(path, []byte(fmt.Sprintf("#!/bin/sh\ncat '%s'\nexit %d\n", file, code)), 0o755))
	return path
}

// commentJob runs the job on a pull request against a forge of the test's own (srv), with vars
// over the job's variables.
type commentJob func(t *testing.T, srv *httptest.Server, vars map[string]string, p pullRequest) (int, string)

// commentCases are the cases about the comment, each against a new forge and with a fake
// auditor that finds a violation: whose comment is updated, how the comments are paged and how
// a report too long for one comment is cut. runURL is the job's log that a cut report links.
func commentCases(t *testing.T, origin string, newForge func(*testing.T) (*forge, *httptest.Server), run commentJob, runURL string) {
	pr := open(t, origin, func(string) {})
	report := "## auditor check: 1 violation\n\n| rule | finding |\n| --- | --- |\n| alert-runbook | a fake finding |\n"
	violation := map[string]string{"AUDITOR": fakeAuditor(t, report, 1)}

	t.Run("a comment by someone else that carries the marker is left alone", func(t *testing.T) {
		f, srv := newForge(t)
		foreign := comment{ID: 1, Body: marker + "\nall clear, merge it", Author: "mallory"}
		f.comments = []comment{foreign}
		code, out := run(t, srv, violation, pr)
		require.Equal(t, 1, code, out)
		got := f.snapshot()
		require.Len(t, got, 2, "a comment of its own is posted")
		assert.Equal(t, foreign, got[0])
		assert.Equal(t, f.poster, got[1].Author)
		assert.Equal(t, marker+"\n"+report, got[1].Body)
	})

	t.Run("the earlier comment is found past the first page and updated", func(t *testing.T) {
		f, srv := newForge(t)
		f.pageSize = 2
		for i := 1; i <= 5; i++ {
			f.comments = append(f.comments, comment{ID: i, Body: fmt.Sprintf("review comment %d", i), Author: "alice"})
		}
		f.comments[2] = comment{ID: 3, Body: marker + "\nnot the bot's", Author: "mallory"}
		f.comments = append(f.comments, comment{ID: 6, Body: marker + "\nan older report", Author: f.poster},
			comment{ID: 7, Body: "one more", Author: "alice"})
		before := f.snapshot()
		code, out := run(t, srv, violation, pr)
		require.Equal(t, 1, code, out)
		got := f.snapshot()
		require.Len(t, got, len(before), "no second comment")
		for i := range got {
			if got[i].ID == 6 {
				assert.Equal(t, marker+"\n"+report, got[i].Body, "the bot's comment on page 3 is updated")
			} else {
				assert.Equal(t, before[i], got[i])
			}
		}
	})

	t.Run("a report too long for a comment is cut at a line and links the run", func(t *testing.T) {
		f, srv := newForge(t)
		var long strings.Builder
		long.WriteString(report + "\n```\n")
		for long.Len() <= f.maxBody {
			long.WriteString("a line of a long diff that goes on and on\n")
		}
		long.WriteString("the last line of the report\n```\n")
		code, out := run(t, srv, map[string]string{"AUDITOR": fakeAuditor(t, long.String(), 1)}, pr)
		require.Equal(t, 1, code, out)
		assert.Contains(t, out, "the last line of the report", "the log holds the full report")
		got := f.snapshot()
		require.Len(t, got, 1, out)
		body := got[0].Body
		assert.LessOrEqual(t, utf8.RuneCountInString(body), f.maxBody)
		assert.True(t, strings.HasPrefix(body, marker+"\n"+report), "the report's start is kept")
		assert.NotContains(t, body, "the last line of the report")
		assert.Contains(t, body, "The report is cut here")
		assert.Contains(t, body, runURL)
		fences := 0
		for _, line := range strings.Split(body, "\n") {
			if strings.HasPrefix(line, "```") {
				fences++
			}
		}
		assert.Zero(t, fences%2, "the code block the cut opened is closed")
		assert.Contains(t, body, "goes on and on\n```\n\n**The report is cut here", "cut after a whole line, the block closed")
	})
}

// TestCheckPRMissingVariablesAreErrors: a variable the script needs that is unset is exit 2 (the
// check could not run) with a message that names it, never 1, which means a finding.
func TestCheckPRMissingVariablesAreErrors(t *testing.T) {
	b, err := os.ReadFile("check-pr.sh")
	require.NoError(t, err)
	github := map[string]string{"GITHUB_ACTIONS": "true", "BASE_REF": "main", "GITHUB_TOKEN": token,
		"GITHUB_REPOSITORY": "llm/platform", "PR_NUMBER": prNumber}
	gitlab := map[string]string{"GITLAB_CI": "true", "BASE_REF": "main", "AUDITOR_GITLAB_TOKEN": token,
		"CI_API_V4_URL": "http://gitlab.invalid/api/v4", "CI_PROJECT_ID": "42", "CI_MERGE_REQUEST_IID": "3"}
	for _, c := range []struct {
		vars  map[string]string
		unset string
		set   map[string]string
		want  string
	}{
		{vars: github, unset: "BASE_REF", want: "BASE_REF is not set"},
		{vars: github, unset: "PR_NUMBER", want: "PR_NUMBER is not set"},
		{vars: github, unset: "GITHUB_REPOSITORY", want: "GITHUB_REPOSITORY is not set"},
		{vars: gitlab, unset: "BASE_REF", want: "BASE_REF is not set"},
		{vars: gitlab, unset: "CI_API_V4_URL", want: "CI_API_V4_URL is not set"},
		{vars: gitlab, unset: "CI_PROJECT_ID", want: "CI_PROJECT_ID is not set"},
		{vars: gitlab, unset: "CI_MERGE_REQUEST_IID", want: "CI_MERGE_REQUEST_IID is not set"},
		{vars: github, set: map[string]string{"FORGE": "bitbucket"}, want: "FORGE=bitbucket"},
	} {
		name := c.unset
		if name == "" {
			name = "FORGE"
		}
		t.Run(name, func(t *testing.T) {
			vars := map[string]string{}
			for k, v := range c.vars {
				if k != c.unset {
					vars[k] = v
				}
			}
			for k, v := range c.set {
				vars[k] = v
			}
			env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()} // nothing of this process's own
			for k, v := range vars {
				env = append(env, k+"="+v)
			}
			code, out := runShell(t, t.TempDir(), env, nil, string(b))
			assert.Equal(t, 2, code, out)
			assert.Contains(t, out, c.want)
		})
	}
}

// TestGitHubActionsFailsAViolatingPullRequestAndCommentsOnce runs the workflow's step as Actions
// does (`bash -e FILE`, the default shell) on a pull request: a change that passes posts nothing;
// one that deletes a runbook an alert links fails the job and posts one comment; fixing it passes
// and updates that same comment. The first run builds the auditor from the target branch, as the
// snippet does by default; the others reuse that build through AUDITOR. The token is
// GITHUB_TOKEN's: GET /user refuses it, and its comments are github-actions[bot]'s.
func TestGitHubActionsFailsAViolatingPullRequestAndCommentsOnce(t *testing.T) {
	origin := newRepository(t)
	f, srv := newGitHub(t)
	script, stepEnv := githubJob(t, map[string]string{
		"github.base_ref":                  "main",
		"github.event.pull_request.number": prNumber,
		"secrets.GITHUB_TOKEN":             token,
	})
	runner := map[string]string{"GITHUB_ACTIONS": "true", "CI": "true", "GITHUB_REPOSITORY": "llm/platform",
		"GITHUB_SERVER_URL": "https://github.example", "GITHUB_RUN_ID": "99"}
	for k, v := range stepEnv {
		runner[k] = v
	}
	home := t.TempDir()
	runOn := func(t *testing.T, srv *httptest.Server, vars map[string]string, p pullRequest) (int, string) {
		env := maps.Clone(runner)
		env["GITHUB_API_URL"] = srv.URL
		env["RUNNER_TEMP"] = t.TempDir()
		maps.Copy(env, vars)
		return runShell(t, p.dir, toolEnv(t, home, env), []string{"-e"}, script)
	}
	run := func(p pullRequest) (int, string) { return runOn(t, srv, nil, p) }

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
	editedGate(t, origin, run)
	t.Run("a change that breaks prod at its next promotion fails", func(t *testing.T) {
		f, srv := newGitHub(t)
		pr := open(t, origin, func(dir string) {
			p := filepath.Join(dir, "overlays/prod/scaling.yaml")
			b, err := os.ReadFile(p)
			require.NoError(t, err)
			raised := strings.Replace(string(b), "maxReplicaCount: 8\n", "maxReplicaCount: 80\n", 1)
			require.NotEqual(t, string(b), raised, "vllm-qwen's ScaledObject in prod's overlay")
			require.NoError(t, os.WriteFile(p, []byte(raised), 0o644))
		})
		code, out := runOn(t, srv, nil, pr)
		require.Equal(t, 1, code, out)
		got := f.snapshot()
		require.Len(t, got, 1)
		assert.Contains(t, got[0].Body, "prod at next promotion")
		assert.Contains(t, got[0].Body, "capacity-gpu-pool-limit")
		assert.Regexp(t, `### prod at its pin \w+: 0 objects changed, 0 violations`, got[0].Body, "prod runs its pin: nothing changes there today")
	})
	t.Run("a failed post keeps the check's exit code", func(t *testing.T) {
		runner["GITHUB_TOKEN"] = "wrong"
		defer func() { runner["GITHUB_TOKEN"] = token }()
		pr := open(t, origin, deleteRunbook(t))
		code, out := run(pr)
		require.Equal(t, 1, code, out)
		assert.Contains(t, out, "the report could not be posted")
	})
	commentCases(t, origin, newGitHub, runOn, "https://github.example/llm/platform/actions/runs/99")
}

// TestGitLabCIFailsAViolatingMergeRequestAndNotesOnce runs the job's script lines as GitLab's
// bash shell does (`set -eo pipefail`), with its variables, against the notes API.
func TestGitLabCIFailsAViolatingMergeRequestAndNotesOnce(t *testing.T) {
	origin := newRepository(t)
	f, srv := newGitLab(t)
	predefined := map[string]string{
		"GITLAB_CI": "true", "CI": "true", "CI_PROJECT_ID": "42",
		"CI_MERGE_REQUEST_IID": "3", "CI_PIPELINE_SOURCE": "merge_request_event",
		"CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main", "AUDITOR_GITLAB_TOKEN": token,
		"CI_JOB_URL": "https://gitlab.example/llm/platform/-/jobs/99",
	}
	script, vars := gitlabJob(t, predefined)
	for k, v := range predefined {
		vars[k] = v
	}
	vars["AUDITOR"] = builtAuditor(t)
	home := t.TempDir()
	runOn := func(t *testing.T, srv *httptest.Server, extra map[string]string, p pullRequest) (int, string) {
		env := maps.Clone(vars)
		env["CI_API_V4_URL"] = srv.URL + "/api/v4"
		maps.Copy(env, extra)
		return runShell(t, p.dir, toolEnv(t, home, env), []string{"-eo", "pipefail"}, strings.Join(script, "\n")+"\n")
	}
	run := func(p pullRequest) (int, string) { return runOn(t, srv, nil, p) }

	pr := reviewCycle(t, f, origin, run)
	editedGate(t, origin, run)
	t.Run("a check that cannot run is exit 2 and posts nothing", func(t *testing.T) {
		vars["BASE_REF"] = "no-such-branch"
		defer func() { vars["BASE_REF"] = "main" }()
		code, out := run(pr)
		assert.Equal(t, 2, code, out)
		assert.Contains(t, out, "no-such-branch")
		require.Len(t, f.snapshot(), 1)
	})
	commentCases(t, origin, newGitLab, runOn, "https://gitlab.example/llm/platform/-/jobs/99")
}
