package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/llm-gitops/platform/internal/gitrepo"
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

// clone is a temporary directory holding one clone, and its lock (lockClone), held for the
// process' life: a clone whose lock is free is a dead process'.
type clone struct {
	dir  string
	lock *os.File
}

// signalGrace is how long a command has to stop after its context is cancelled by a signal
// before its clones are removed under it and the process dies by the signal.
const signalGrace = 5 * time.Second

// watchSignals makes SIGINT, SIGTERM and SIGHUP cancel the command, so that main removes its
// clones once it has stopped writing to them and then dies by the signal; a command that has not
// stopped within signalGrace dies all the same, its clones removed. The caller holds g.mu.
func (g *gitFlags) watchSignals() {
	if g.onSignal || g.cancel == nil {
		return
	}
	g.onSignal = true
	var watched []os.Signal
	for _, s := range []os.Signal{os.Interrupt, syscall.SIGTERM, syscall.SIGHUP} {
		if !signal.Ignored(s) { // nohup, or a background job of a script: ignored it stays
			watched = append(watched, s)
		}
	}
	if len(watched) == 0 {
		return
	}
	sig := make(chan os.Signal, 2)
	signal.Notify(sig, watched...)
	go func() {
		s := <-sig
		g.mu.Lock()
		g.got = s
		g.mu.Unlock()
		g.cancel()
		select { // a second signal does not wait for the command
		case <-sig:
		case <-time.After(signalGrace):
		}
		g.cleanup()
		dieBy(s)
	}()
}

// signalled is the signal that cancelled the command, or nil.
func (g *gitFlags) signalled() os.Signal {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.got
}

// dieBy ends the process by s with its default action, as if it had not been handled.
func dieBy(s os.Signal) {
	signal.Reset(s)
	if n, ok := s.(syscall.Signal); ok {
		_ = syscall.Kill(os.Getpid(), n)
		time.Sleep(time.Second)
		os.Exit(128 + int(n))
	}
	os.Exit(1)
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

// cleanup removes the clones this process made.
func (g *gitFlags) cleanup() {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, c := range g.clones {
		if err := os.RemoveAll(c.dir); err != nil {
			fmt.Fprintf(os.Stderr, "auditor: remove the clone in %s: %v\n", c.dir, err)
		}
		if c.lock != nil {
			c.lock.Close()
		}
	}
	g.clones = nil
}

// clonePrefix starts the name of a clone's temporary directory.
const clonePrefix = "auditor-clone-"

// lockName is the file in a clone's temporary directory its process holds an exclusive flock on
// for as long as it runs; the kernel releases it when the process dies, however it dies.
const lockName = "lock"

// lockClone creates dir's lock file and locks it; the file stays open (close-on-exec: render
// workers do not inherit it).
func lockClone(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("lock the clone in %s: %w", dir, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock the clone in %s: %w", dir, err)
	}
	return f, nil
}

// sweepDeadClones removes, once per process, the clones left in the temporary directory by
// auditor processes that no longer run — one killed by a signal it does not handle (SIGPIPE
// from `auditor ledger list | head`, SIGKILL, the OOM killer) cannot remove its own: those whose
// lock nobody holds. A flock is the kernel's, so this holds across PID namespaces sharing /tmp
// and whatever the dead process' pid has become. A directory without a lock file (one being
// made) is left alone. The caller holds g.mu.
func (g *gitFlags) sweepDeadClones() {
	if g.swept {
		return
	}
	g.swept = true
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), clonePrefix+"*"))
	for _, dir := range dirs {
		f, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|syscall.O_NOFOLLOW, 0)
		if err != nil {
			continue
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) == nil {
			_ = os.RemoveAll(dir) // still holding the lock: no other sweeper races this one
		}
		f.Close()
	}
}
