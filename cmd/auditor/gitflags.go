package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/llm-gitops/platform/internal/gitrepo"
)

// gitFlags are the Git credentials and timeout of every command that reads or writes --repo: the
// same as the daemon's repoAuth and fetchTimeout. Secrets come from files, never the command line.
type gitFlags struct {
	auth    gitrepo.RemoteConfig
	timeout time.Duration

	mu       sync.Mutex
	clones   []string // this process' clones on disk, removed by cleanup
	onSignal bool     // cleanup also runs on SIGINT and SIGTERM
}

// gitOpts holds the root command's persistent Git flags.
var gitOpts gitFlags

func (g *gitFlags) add(cmd *cobra.Command) {
	f := cmd.PersistentFlags()
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
	r, err := g.remote(location)
	if err != nil {
		return nil, err
	}
	if ctx == nil {
		ctx = context.Background()
	}
	timeout := g.timeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return r.Open(ctx)
}

// remote makes a writable remote of location with the credentials: a URL as is, a directory as
// file://. Its clone is kept in a temporary directory that cleanup removes (at exit, and on
// SIGINT or SIGTERM): in memory, go-git
// would hold every object of the history inflated (this repository's history holds a 165 MB
// binary committed by mistake), on disk it keeps a 16 MiB object cache.
func (g *gitFlags) remote(location string) (*gitrepo.Remote, error) {
	rc := g.auth
	rc.URL = location
	dir, err := os.MkdirTemp("", "auditor-clone-")
	if err != nil {
		return nil, fmt.Errorf("a directory for the clone of %s: %w", gitrepo.RedactURL(location), err)
	}
	g.mu.Lock()
	if len(g.clones) == 0 && !g.onSignal {
		// Interrupted or terminated, the command still removes its clones (`serve` clones none
		// here, and handles these signals itself).
		g.onSignal = true
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		go func() {
			s := <-sig
			g.cleanup()
			os.Exit(128 + int(s.(syscall.Signal)))
		}()
	}
	g.clones = append(g.clones, dir)
	g.mu.Unlock()
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
	for _, dir := range g.clones {
		_ = os.RemoveAll(dir)
	}
	g.clones = nil
}
