package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"
)

// RemoteConfig describes a remote repository the platform writes to. Secrets are read from files
// (e.g. mounted Kubernetes secrets) at every operation, so rotated credentials are picked up.
type RemoteConfig struct {
	// URL of the repository: file://, https:// (or http://), ssh:// or scp-like user@host:path.
	URL string

	// Username for HTTP(S) basic auth ("git" when empty and PasswordFile is set).
	Username string
	// PasswordFile holds the HTTP(S) password or token; surrounding whitespace is trimmed.
	PasswordFile string

	// SSHKeyFile is a PEM/OpenSSH private key for ssh:// URLs.
	SSHKeyFile string
	// SSHKeyPassphraseFile optionally holds the key's passphrase.
	SSHKeyPassphraseFile string
	// SSHUser is the SSH user name ("git" when empty and the URL names none).
	SSHUser string
	// KnownHostsFile is the known_hosts file used to verify the server's host key.
	KnownHostsFile string
	// InsecureIgnoreHostKey disables host key verification (tests only).
	InsecureIgnoreHostKey bool

	// SignKeyFile optionally holds an OpenPGP private key (armored or binary) used to sign commits.
	SignKeyFile string
	// SignKeyPassphraseFile optionally holds the passphrase of the signing key.
	SignKeyPassphraseFile string

	// Dir, when set, keeps the clone on disk, a bare repository there reused by every Open and
	// Update and by the next process, which fetches only what is new; empty keeps it in memory.
	// A long-running process should set it: in memory, go-git holds every object of the history
	// inflated (one binary committed by mistake and deleted since costs its full size, always),
	// and every clone starts from nothing.
	Dir string `json:"-"`

	// DryRun makes Update and Revert build their commits without pushing them: each Result
	// names the commit that would have been pushed, and later calls on the same Remote build on
	// it, as they would on the pushed one.
	DryRun bool `json:"-"`

	// OnRetry, when set, is told of every failed attempt of an Update or Revert that will be
	// retried: the attempt's number, its error and the wait before the next.
	OnRetry func(attempt int, err error, wait time.Duration) `json:"-"`
}

// Remote writes commits to one remote repository. It keeps an in-memory clone between calls;
// calls on one Remote are serialised.
type Remote struct {
	cfg  RemoteConfig
	mu   sync.Mutex
	repo *git.Repository
	dry  map[string]plumbing.Hash // DryRun: branch → the last commit built and not pushed
}

// NewRemote validates cfg and checks that the secret files it names are readable.
func NewRemote(cfg RemoteConfig) (*Remote, error) {
	if cfg.URL == "" {
		return nil, errors.New("remote: empty URL")
	}
	if _, err := transport.NewEndpoint(cfg.URL); err != nil {
		return nil, fmt.Errorf("remote %s: %w", redactURL(cfg.URL), err)
	}
	r := &Remote{cfg: cfg}
	if _, err := r.auth(); err != nil {
		return nil, err
	}
	if _, err := r.signer(); err != nil {
		return nil, err
	}
	return r, nil
}

// URL is the remote's URL without user info.
func (r *Remote) URL() string { return redactURL(r.cfg.URL) }

// Open clones the remote (into Dir, or memory) with the remote's credentials; Repo.Fetch
// refreshes it, reading the credentials from their files again, as every Update does.
func (r *Remote) Open(ctx context.Context) (*Repo, error) {
	auth, err := r.auth()
	if err != nil {
		return nil, err
	}
	repo, err := openURL(ctx, r.cfg.URL, auth, r.cfg.Dir)
	if err != nil {
		return nil, err
	}
	repo.creds = r.auth
	return repo, nil
}

// RedactURL removes user info (and so any password or token) from a URL, for logs and errors.
func RedactURL(s string) string { return redactURL(s) }

// redactURL removes user info (and so any password) from a URL.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return s
	}
	u.User = nil
	return u.String()
}

// openURL clones a URL (init + fetch) into dir, or memory when dir is empty.
func openURL(ctx context.Context, location string, auth transport.AuthMethod, dir string) (*Repo, error) {
	// Init + fetch rather than clone: a clone fails when the remote HEAD names a missing branch,
	// as a fresh bare repository's does.
	location, auth = withoutUserinfo(location, auth)
	r, err := cloneStorage(location, dir)
	if err != nil {
		return nil, fmt.Errorf("clone %s: %w", redactURL(location), err)
	}
	repo := &Repo{repo: r, location: location, remote: true, auth: auth, mu: &sync.Mutex{}, dir: dir}
	err = repo.Fetch(ctx)
	if err != nil && dir != "" && !unreachable(ctx, err) {
		// The server answered but the clone on disk could not take the fetch (a process killed
		// mid-fetch leaves a torn ref or index): clone again from nothing.
		if err := os.RemoveAll(dir); err != nil {
			return nil, err
		}
		if r, err = cloneStorage(location, dir); err != nil {
			return nil, fmt.Errorf("clone %s: %w", redactURL(location), err)
		}
		repo.repo, repo.fetcher = r, nil
		err = repo.Fetch(ctx)
	}
	if err != nil {
		return nil, err
	}
	return repo, nil
}

// withoutUserinfo moves an http(s) URL's user:password into basic auth (unless auth is set), so
// no credential is written into a clone's config on disk or shown in an error.
func withoutUserinfo(location string, auth transport.AuthMethod) (string, transport.AuthMethod) {
	u, err := url.Parse(location)
	if err != nil || u.User == nil || (u.Scheme != "http" && u.Scheme != "https") {
		return location, auth
	}
	if pw, ok := u.User.Password(); ok && auth == nil {
		auth = &githttp.BasicAuth{Username: u.User.Username(), Password: pw}
	}
	u.User = nil
	return u.String(), auth
}

// objectCacheSize bounds the decoded objects an on-disk clone keeps in memory (go-git's default
// is 96 MiB).
const objectCacheSize = 16 * cache.MiByte

// cloneStorage is a repository with the remote "origin" at location: in memory when dir is
// empty, else the bare repository at dir — reused when it is a clone of location, made anew when
// it is missing, unreadable or of another URL.
func cloneStorage(location, dir string) (*git.Repository, error) {
	if dir == "" {
		return initClone(memory.NewStorage(), location)
	}
	// A fetch killed midway leaves its temporary pack; nothing else removes it.
	if tmp, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "tmp_*")); err == nil {
		for _, f := range tmp {
			_ = os.Remove(f)
		}
	}
	st := filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRU(objectCacheSize))
	if r, err := git.Open(st, nil); err == nil {
		if rc, err := r.Remote("origin"); err == nil && slices.Equal(rc.Config().URLs, []string{location}) {
			return r, nil
		}
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	return initClone(filesystem.NewStorage(osfs.New(dir), cache.NewObjectLRU(objectCacheSize)), location)
}

func initClone(st storage.Storer, location string) (*git.Repository, error) {
	r, err := git.Init(st, nil)
	if err != nil {
		return nil, err
	}
	if _, err := r.CreateRemote(&config.RemoteConfig{Name: "origin", URLs: []string{location}}); err != nil {
		return nil, err
	}
	return r, nil
}
