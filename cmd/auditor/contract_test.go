package main

import (
	"context"
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
// (an unknown subcommand, output format, time, env or Application), the Git flags exactly where
// --repo is, and one time flag, --at.
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
				bad := append(args, "--repo", "file://"+repo.bare, "--env", "qa")
				for _, req := range []string{"peak", "to"} { // required flags besides --env
					if flags.Lookup(req) != nil {
						bad = append(bad, "--"+req, "x")
					}
				}
				if path == "rollback" {
					bad = append(bad, "HEAD")
				}
				assert.Equal(t, codeError, exitOf(t, bad...), "unknown env")
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
				assert.Equal(t, codeError, exitOf(t, append(args, "--repo", "file://"+repo.bare, "--env", "dev", "--revision", "nosuch")...),
					"unknown revision")
			}
		})
	}
}
