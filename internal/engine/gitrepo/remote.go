package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ProtonMail/go-crypto/openpgp"
	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"github.com/go-git/go-git/v5/storage"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"
	gossh "golang.org/x/crypto/ssh"
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

// AuthError reports that the remote refused the credentials (or required some). It is never
// retried. Its text never contains secrets.
type AuthError struct {
	URL string // with any user info removed
	Err error
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("authentication to %s failed: %v", e.URL, e.Err)
}

func (e *AuthError) Unwrap() error { return e.Err }

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

func readSecret(path, what string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		// The error names the file, never its content.
		return "", fmt.Errorf("read %s file: %w", what, err)
	}
	return strings.TrimSpace(string(b)), nil
}

// auth builds the transport credentials from the configured files (nil for file:// or none).
func (r *Remote) auth() (transport.AuthMethod, error) {
	c := r.cfg
	ep, err := transport.NewEndpoint(c.URL)
	if err != nil {
		return nil, fmt.Errorf("remote %s: %w", redactURL(c.URL), err)
	}
	switch ep.Protocol {
	case "http", "https":
		if c.PasswordFile == "" {
			_, fromURL := withoutUserinfo(c.URL, nil) // user:password@ in the URL, if any
			return fromURL, nil
		}
		pw, err := readSecret(c.PasswordFile, "password")
		if err != nil {
			return nil, err
		}
		user := c.Username
		if user == "" {
			user = "git"
		}
		return &githttp.BasicAuth{Username: user, Password: pw}, nil
	case "ssh":
		if c.SSHKeyFile == "" {
			return nil, fmt.Errorf("remote %s: ssh URL needs SSHKeyFile", redactURL(c.URL))
		}
		var pass string
		if c.SSHKeyPassphraseFile != "" {
			if pass, err = readSecret(c.SSHKeyPassphraseFile, "ssh key passphrase"); err != nil {
				return nil, err
			}
		}
		user := c.SSHUser
		if user == "" {
			user = ep.User
		}
		if user == "" {
			user = "git"
		}
		keys, err := gitssh.NewPublicKeysFromFile(user, c.SSHKeyFile, pass)
		if err != nil {
			return nil, fmt.Errorf("load ssh key %s: %w", c.SSHKeyFile, err)
		}
		switch {
		case c.InsecureIgnoreHostKey:
			keys.HostKeyCallback = gossh.InsecureIgnoreHostKey() //nolint:gosec // explicit opt-in
		case c.KnownHostsFile != "":
			cb, err := gitssh.NewKnownHostsCallback(c.KnownHostsFile)
			if err != nil {
				return nil, fmt.Errorf("load known_hosts %s: %w", c.KnownHostsFile, err)
			}
			keys.HostKeyCallback = cb
		default:
			return nil, fmt.Errorf("remote %s: ssh needs KnownHostsFile (or InsecureIgnoreHostKey)", redactURL(c.URL))
		}
		return keys, nil
	default:
		return nil, nil
	}
}

// signer loads the OpenPGP signing key, or nil when none is configured.
func (r *Remote) signer() (*openpgp.Entity, error) {
	c := r.cfg
	if c.SignKeyFile == "" {
		return nil, nil
	}
	f, err := os.Open(c.SignKeyFile)
	if err != nil {
		return nil, fmt.Errorf("read signing key file: %w", err)
	}
	defer f.Close()
	ring, err := openpgp.ReadArmoredKeyRing(f)
	if err != nil {
		if _, serr := f.Seek(0, 0); serr != nil {
			return nil, fmt.Errorf("read signing key %s: %w", c.SignKeyFile, serr)
		}
		if ring, err = openpgp.ReadKeyRing(f); err != nil {
			return nil, fmt.Errorf("read signing key %s: %w", c.SignKeyFile, err)
		}
	}
	for _, e := range ring {
		if e.PrivateKey == nil {
			continue
		}
		if e.PrivateKey.Encrypted {
			if c.SignKeyPassphraseFile == "" {
				return nil, fmt.Errorf("signing key %s is encrypted and no passphrase file is set", c.SignKeyFile)
			}
			pass, err := readSecret(c.SignKeyPassphraseFile, "signing key passphrase")
			if err != nil {
				return nil, err
			}
			if err := e.DecryptPrivateKeys([]byte(pass)); err != nil {
				return nil, fmt.Errorf("decrypt signing key %s: %w", c.SignKeyFile, err)
			}
		}
		return e, nil
	}
	return nil, fmt.Errorf("signing key file %s holds no private key", c.SignKeyFile)
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

// Fetch updates a repository cloned from a URL (all branches and tags; branches deleted on
// the remote are pruned). It is a no-op for a local directory.
func (r *Repo) Fetch(ctx context.Context) error {
	if !r.remote {
		return nil
	}
	if ctx == nil {
		ctx = context.Background()
	}
	auth := r.auth
	if r.creds != nil {
		a, err := r.creds()
		if err != nil {
			return fmt.Errorf("fetch %s: %w", redactURL(r.location), err)
		}
		auth = a
	}
	r.fetchMu.Lock()
	defer r.fetchMu.Unlock()
	if r.dir == "" {
		r.mu.Lock()
		defer r.mu.Unlock()
		return fetchErr(r.location, r.repo.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", Auth: auth, Prune: true,
			RefSpecs: []config.RefSpec{"+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"}}))
	}
	// On disk, the fetch writes its pack and its refs through a storage of its own, readers
	// going on meanwhile; its refs land under fetchedRefs and are published at the end.
	if r.fetcher == nil {
		f, err := git.Open(filesystem.NewStorage(osfs.New(r.dir), cache.NewObjectLRU(objectCacheSize)), nil)
		if err != nil {
			return fmt.Errorf("fetch %s: open %s: %w", redactURL(r.location), r.dir, err)
		}
		r.fetcher = f
	}
	err := r.fetcher.FetchContext(ctx, &git.FetchOptions{RemoteName: "origin", Auth: auth, Prune: true,
		RefSpecs: []config.RefSpec{"+refs/heads/*:" + fetchedRefs + "heads/*", "+refs/tags/*:" + fetchedRefs + "tags/*"}})
	if err := fetchErr(r.location, err); err != nil {
		return err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if err := publishFetched(r.repo); err != nil {
		return fmt.Errorf("fetch %s: %w", redactURL(r.location), err)
	}
	return nil
}

// fetchedRefs is where a fetch on disk puts the remote's refs (heads/ and tags/) before they
// are published as the remote-tracking branches and the tags readers see.
const fetchedRefs = "refs/fetched/"

// publishFetched makes repo's remote-tracking branches and tags those the last fetch wrote under
// fetchedRefs (what the remote no longer has is pruned), and makes repo see the fetched packs.
func publishFetched(repo *git.Repository) error {
	st := repo.Storer
	want := map[plumbing.ReferenceName]plumbing.Hash{}
	var have []*plumbing.Reference
	refs, err := st.IterReferences()
	if err != nil {
		return err
	}
	err = refs.ForEach(func(ref *plumbing.Reference) error {
		name := ref.Name().String()
		switch {
		case ref.Type() != plumbing.HashReference:
		case strings.HasPrefix(name, fetchedRefs+"heads/"):
			want[plumbing.NewRemoteReferenceName("origin", strings.TrimPrefix(name, fetchedRefs+"heads/"))] = ref.Hash()
		case strings.HasPrefix(name, fetchedRefs+"tags/"):
			want[plumbing.NewTagReferenceName(strings.TrimPrefix(name, fetchedRefs+"tags/"))] = ref.Hash()
		case ref.Name().IsRemote() && strings.HasPrefix(name, "refs/remotes/origin/"), ref.Name().IsTag():
			have = append(have, ref)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if r, ok := st.(interface{ Reindex() }); ok {
		r.Reindex() // the packs the fetcher wrote
	}
	for _, ref := range have {
		if h, ok := want[ref.Name()]; ok && h == ref.Hash() {
			delete(want, ref.Name())
		} else if !ok {
			if err := st.RemoveReference(ref.Name()); err != nil {
				return err
			}
		}
	}
	for name, h := range want {
		if err := st.SetReference(plumbing.NewHashReference(name, h)); err != nil {
			return err
		}
	}
	return nil
}

// fetchErr classifies a fetch's error: none when the remote had nothing new or nothing at all.
func fetchErr(location string, err error) error {
	switch {
	case err == nil, errors.Is(err, git.NoErrAlreadyUpToDate), errors.Is(err, transport.ErrEmptyRemoteRepository):
		return nil
	case isAuthErr(err):
		return &AuthError{URL: redactURL(location), Err: err}
	default:
		return fmt.Errorf("fetch %s: %w", redactURL(location), err)
	}
}

// unreachable says a fetch failed for the server or the network (or the context), not for what
// the clone on disk holds.
func unreachable(ctx context.Context, err error) bool {
	var netErr net.Error
	var auth *AuthError
	var status *githttp.Err // the server answered with an error status
	return ctx.Err() != nil || errors.As(err, &auth) || errors.As(err, &netErr) || errors.As(err, &status) ||
		errors.Is(err, transport.ErrRepositoryNotFound) || errors.Is(err, transport.ErrEmptyUploadPackRequest)
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

func isAuthErr(err error) bool {
	return errors.Is(err, transport.ErrAuthenticationRequired) || errors.Is(err, transport.ErrAuthorizationFailed)
}
