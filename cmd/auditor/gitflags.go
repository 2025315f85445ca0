package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// gitFlags are the Git credentials and timeout of every command that reads or writes --repo: the
// same as the daemon's repoAuth and fetchTimeout. Secrets come from files, never the command line.
type gitFlags struct {
	auth    gitrepo.RemoteConfig
	timeout time.Duration

	// ctx is the running command's context and cancel cancels it (set by main; nil in tests
	// that run commands in process, where no signal is handled).
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	clones   []clone // this process' clones on disk, removed by cleanup
	onSignal bool    // SIGINT, SIGTERM and SIGHUP are handled (watchSignals)
	swept    bool    // the clones of dead processes were removed (sweepDeadClones)

	got os.Signal // the signal received, if any
}

// gitOpts holds the Git flags of the commands that take --repo.
var gitOpts gitFlags

// addRepoFlag adds --repo, with usage, and the Git credentials and timeout it is read with, to
// cmd alone: commands that read no repository do not list them in their help.
func addRepoFlag(cmd *cobra.Command, repo *string, usage string) {
	cmd.Flags().StringVar(repo, "repo", ".", usage)
	gitOpts.bind(cmd.Flags())
}

// addRootGitFlags keeps the Git flags where they were before they moved to the commands taking
// --repo: `auditor --git-password-file F ledger sync` still works, hidden, with a warning.
func addRootGitFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	gitOpts.bind(f)
	f.VisitAll(func(fl *pflag.Flag) {
		if strings.HasPrefix(fl.Name, "git-") {
			_ = f.MarkDeprecated(fl.Name, "give it after the command name")
		}
	})
}

// bind defines the Git flags on f, bound to g.
func (g *gitFlags) bind(f *pflag.FlagSet) {
	f.StringVar(&g.auth.Username, "git-username", "", `HTTPS user name for --repo (default "git" with --git-password-file)`)
	f.StringVar(&g.auth.PasswordFile, "git-password-file", "", "file holding the HTTPS password or token for --repo")
	f.StringVar(&g.auth.SSHKeyFile, "git-ssh-key-file", "", "SSH private key for ssh:// and user@host:path repositories")
	f.StringVar(&g.auth.KnownHostsFile, "git-known-hosts-file", "", "known_hosts file to verify the SSH server with")
	f.DurationVar(&g.timeout, "git-timeout", time.Minute, "give up on one clone or fetch of --repo after this long")
}

// open opens location: a directory in place, a URL (or user@host:path) cloned onto disk with
// the credentials, within the timeout. Errors never carry the URL's user info.
func (g *gitFlags) open(ctx context.Context, location string) (*gitrepo.Repo, error) {
	if !gitrepo.IsURL(location) {
		return gitrepo.Open(location)
	}
	r, err := g.remote(location, false)
	if err != nil {
		return nil, err
	}
	return g.openRemote(ctx, r)
}

// openRemote clones or fetches r within --git-timeout; a signal ends it too.
func (g *gitFlags) openRemote(ctx context.Context, r *gitrepo.Remote) (*gitrepo.Repo, error) {
	if ctx == nil {
		ctx = context.Background()
	}
	timeout := g.timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if g.ctx != nil { // a signal ends the clone, whatever context the caller passed
		defer context.AfterFunc(g.ctx, cancel)()
	}
	return r.Open(ctx)
}

// remote makes a writable remote of location with the credentials: a URL as is, a directory as
// file://. Its clone is kept in a temporary directory that cleanup removes (at exit, and when a
// signal ends the command): in memory, go-git would hold every object of the history inflated
// (this repository's history holds a 165 MB binary committed by mistake); on disk it keeps a
// 16 MiB object cache.
//
// With dryRun, its commits are built and never pushed (gitrepo.RemoteConfig.DryRun). Each push
// attempt that will be retried is said on stderr.
func (g *gitFlags) remote(location string, dryRun bool) (*gitrepo.Remote, error) {
	rc := g.auth
	rc.URL = location
	rc.DryRun = dryRun
	rc.OnRetry = func(attempt int, err error, wait time.Duration) {
		fmt.Fprintf(os.Stderr, "auditor: attempt %d: %v; retrying in %s\n", attempt, err, wait.Round(time.Millisecond))
	}
	g.mu.Lock()
	g.watchSignals() // before the directory exists: a signal from here on removes it
	g.sweepDeadClones()
	g.mu.Unlock()
	dir, err := os.MkdirTemp("", clonePrefix)
	if err != nil {
		return nil, fmt.Errorf("a directory for the clone of %s: %w", gitrepo.RedactURL(location), err)
	}
	lock, err := lockClone(dir)
	g.mu.Lock()
	g.clones = append(g.clones, clone{dir: dir, lock: lock})
	g.mu.Unlock()
	if err != nil {
		return nil, err
	}
	// A directory inside the one MkdirTemp made (mode 0700): the clone creates it by name, which
	// in a shared /tmp nobody else can have planted.
	rc.Dir = filepath.Join(dir, "repo")
	if !gitrepo.IsURL(location) {
		abs, err := filepath.Abs(location)
		if err != nil {
			return nil, err
		}
		rc.URL = "file://" + abs
	}
	return gitrepo.NewRemote(rc)
}
