package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/llm-gitops/platform/internal/testing/testcluster"
)

// commands is every command of the tree under root, with its path after "auditor".
func commands(root *cobra.Command) map[string]*cobra.Command {
	out := map[string]*cobra.Command{}
	var walk func(c *cobra.Command, path []string)
	walk = func(c *cobra.Command, path []string) {
		if len(path) > 0 {
			out[strings.Join(path, " ")] = c
		}
		for _, sub := range c.Commands() {
			if sub.Name() == "help" || sub.Name() == "completion" {
				continue
			}
			walk(sub, append(append([]string(nil), path...), sub.Name()))
		}
	}
	walk(root, nil)
	return out
}

// exitOf runs `auditor args...` in process and returns its exit code, as main would set it.
func exitOf(t *testing.T, args ...string) int {
	t.Helper()
	code, _ := exitAndError(t, args...)
	return code
}

// exitAndError runs `auditor args...` in process and returns its exit code and what main would
// print on stderr for its error.
func exitAndError(t *testing.T, args ...string) (int, string) {
	t.Helper()
	_, err := runCmd(t, newRootCommand(), args...)
	var stderr strings.Builder
	code := exitStatus(&stderr, err)
	return code, stderr.String()
}

// TestCommandContract holds every command to the CLI's conventions: exit 2 for bad input
// (an unknown subcommand, output format, time, env, revision, Application or a repository that
// does not exist), each said in the same words by every command; the Git flags exactly where
// --repo is; one time flag, --at; one Argo CD namespace flag, --argocd-namespace.
func TestCommandContract(t *testing.T) {
	repo := newLedgerRepo(t)
	// Which Applications an env has is known once the cluster is read: the commands taking
	// --app are run against a test cluster, started once for them all.
	var kubeconfig string
	cluster := func(sub *testing.T) string {
		sub.Helper()
		testcluster.Need(sub)
		if kubeconfig == "" {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			c, err := testcluster.Start(ctx, testcluster.Options{})
			require.NoError(sub, err)
			t.Cleanup(c.Stop) // the whole test's, not this subtest's
			kubeconfig = c.Kubeconfig
		}
		return kubeconfig
	}
	// The arguments a command needs before it reads --repo.
	positional := map[string][]string{"rollback": {"HEAD"}, "ledger show": {"0123abcd"}, "blame": {"Deployment/vllm-qwen"},
		"site set": {"domain=llm.example.org"}}
	// The directory each command reads (site set edits a work tree), and its other required flags.
	repoOf := func(path string) string {
		if path == "site set" {
			return repo.work
		}
		return "file://" + repo.bare
	}
	required := []string{"peak", "to", "model", "prometheus"}
	gitFlags := []string{"git-username", "git-password-file", "git-ssh-key-file", "git-known-hosts-file", "git-timeout"}
	all := commands(newRootCommand())
	require.Contains(t, all, "ledger at")
	for path, cmd := range all {
		args := strings.Fields(path)
		t.Run(path, func(t *testing.T) {
			if cmd.HasSubCommands() {
				assert.Equal(t, codeError, exitOf(t, append(args, "nosuch")...), "unknown subcommand")
				return
			}
			flags := cmd.Flags()
			for _, name := range gitFlags {
				assert.Equal(t, flags.Lookup("repo") != nil, flags.Lookup(name) != nil, "--%s is where --repo is", name)
			}
			if f := flags.Lookup("app-namespace"); f != nil {
				assert.True(t, f.Hidden, "--app-namespace is a hidden alias of --argocd-namespace")
				assert.NotEmpty(t, f.Deprecated, "--app-namespace says to use --argocd-namespace")
				assert.NotNil(t, flags.Lookup("argocd-namespace"), "--argocd-namespace is where --app-namespace is")
			}
			for _, name := range []string{"time", "now"} {
				if f := flags.Lookup(name); f != nil {
					assert.True(t, f.Hidden, "--%s is a hidden alias of --at", name)
				}
			}
			if flags.Lookup("output") != nil {
				assert.Equal(t, codeError, exitOf(t, append(args, "-o", "bogus")...), "unknown output format")
			}
			if flags.Lookup("at") != nil {
				assert.Equal(t, codeError, exitOf(t, append(args, "--at", "yesterday")...), "malformed time")
			}
			assert.Equal(t, codeError, exitOf(t, append(args, "--no-such-flag")...), "unknown flag")
			if flags.Lookup("selector") != nil {
				assert.Equal(t, codeError, exitOf(t, append(args, "--env", "dev", "--selector", "team in (a")...), "malformed selector")
			}
			if flags.Lookup("env") != nil && flags.Lookup("repo") != nil && path != "serve" {
				bad := append(args, "--repo", repoOf(path), "--env", "qa")
				for _, req := range required { // required flags besides --env
					if flags.Lookup(req) != nil {
						bad = append(bad, "--"+req, "x")
					}
				}
				bad = append(bad, positional[path]...)
				code, msg := exitAndError(t, bad...)
				assert.Equal(t, codeError, code, "unknown env: %s", msg)
				assert.Contains(t, msg, `unknown env "qa" (known envs: dev, prod, staging)`, "one wording for an unknown env")
			}
			if flags.Lookup("repo") != nil {
				missing := append(args, "--repo", "/nonexistent/platform")
				for _, req := range append([]string{"env", "base"}, required...) {
					if flags.Lookup(req) != nil {
						missing = append(missing, "--"+req, "prod")
					}
				}
				missing = append(missing, positional[path]...)
				code, msg := exitAndError(t, missing...)
				assert.Equal(t, codeError, code, "missing repository: %s", msg)
				assert.Equal(t, "error: repository /nonexistent/platform does not exist\n", msg, "one wording for a missing repository")
			}
			if flags.Lookup("app") != nil {
				t.Run("unknown app", func(t *testing.T) {
					bad := append(args, "--repo", "file://"+repo.bare, "--kubeconfig", cluster(t), "--app", "nosuch")
					if flags.Lookup("cache-dir") != nil {
						bad = append(bad, "--cache-dir", "off")
					}
					// The cluster has no Argo CD: each env is its own Application, llm-<env>.
					code, msg := exitAndError(t, append(bad, "--env", "dev")...)
					assert.Equal(t, codeError, code, "unknown Application: %s", msg)
					assert.Contains(t, msg, "nosuch", "names the Application")
					assert.Contains(t, msg, "llm-dev", "names the env's Applications")
					if flags.Lookup("all") != nil {
						code, msg = exitAndError(t, append(bad, "--all")...)
						assert.Equal(t, codeError, code, "unknown Application of every env: %s", msg)
						assert.Contains(t, msg, "nosuch", "names the Application")
						for _, env := range []string{"dev", "prod", "staging"} {
							assert.Contains(t, msg, env+": llm-"+env, "names each env's Applications")
						}
					}
				})
			}
			if flags.Lookup("revision") != nil && flags.Lookup("env") != nil {
				rev := append(args, "--repo", "file://"+repo.bare, "--env", "dev", "--revision", "nosuch")
				for _, req := range required {
					if flags.Lookup(req) != nil {
						rev = append(rev, "--"+req, "x")
					}
				}
				code, msg := exitAndError(t, append(rev, positional[path]...)...)
				assert.Equal(t, codeError, code, "unknown revision: %s", msg)
				assert.Contains(t, msg, `revision "nosuch" not found in file://`+repo.bare+"\n", "one wording for an unknown revision, nothing after it")
			}
			for _, name := range []string{"base", "head"} {
				if flags.Lookup(name) == nil {
					continue
				}
				for _, bad := range []string{"nosuch", "nosuch^{tree"} { // go-git's text is not passed on
					revs := append(args, "--repo", "file://"+repo.bare, "--base", "HEAD", "--"+name, bad)
					code, msg := exitAndError(t, revs...)
					assert.Equal(t, codeError, code, "unknown --%s: %s", name, msg)
					assert.Contains(t, msg, fmt.Sprintf("revision %q not found in file://%s\n", bad, repo.bare), "--%s: one wording for an unknown revision", name)
				}
			}
		})
	}
}

// TestExitCodesOfFindings: a finding exits 1 whatever the command, as drift and violations do;
// a result with nothing to report exits 0.
func TestExitCodesOfFindings(t *testing.T) {
	kv := []string{"capacity", "kv", "--layers", "32", "--kv-heads", "8", "--head-dim", "128", "--context", "8000"}
	for _, tc := range []struct {
		name string
		args []string
		code int
	}{
		{"kv: conversations fit", append(kv, "--free-memory", "10GiB"), codeOK},
		{"kv: no conversation fits", append(kv, "--free-memory", "512Mi"), codeFound},
		{"kv: vLLM worst case does not fit", append(kv, "--gpu-memory", "48305799168", "--weights-size", "16060522496", "--max-num-seqs", "64"), codeFound},
		{"coldstart: probe covers it", []string{"capacity", "coldstart", "--startup-probe-budget", "600s"}, codeOK},
		{"coldstart: probe too short", []string{"capacity", "coldstart", "--startup-probe-budget", "60s"}, codeFound},
		{"hpa: a decision is no finding", []string{"capacity", "hpa", "--current", "4", "--metric", "30", "--target", "10"}, codeOK},
		{"version", []string{"version"}, codeOK},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, msg := exitAndError(t, tc.args...)
			assert.Equal(t, tc.code, code, msg)
			assert.Empty(t, msg, "a finding is said on stdout, not as an error")
		})
	}
}
