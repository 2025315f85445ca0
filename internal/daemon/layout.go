package daemon

import (
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"

	"github.com/llm-gitops/platform/internal/engine/audit"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/layout"
)

// repoLayout follows the repository's layout (.auditor.yaml) at its branch head: refresh reads
// it again when the head moved (one ref lookup when it did not), and the audits' names ask
// current. A layout that does not parse, or that the daemon cannot follow (usable), is logged
// once per commit and leaves the last good one in use; before any was good, failing says why
// the audits fail. Without envs in the file, the convention's envs (File "") are named by
// convention.
type repoLayout struct {
	repo func() *gitrepo.Repo // nil before the repository is open
	log  *slog.Logger
	// convention names the convention's envs (the config's prefixes); nil keeps the layout's.
	convention func(*layout.Layout) *layout.Layout
	// usable refuses a layout that parses but cannot be followed (its envs' Applications in
	// another namespace than the one watched); nil accepts every one.
	usable func(*layout.Layout) error

	refreshMu sync.Mutex // one read at a time

	mu       sync.Mutex
	head     string            // the commit last read
	good     *layout.Layout    // the last good layout; nil before one
	haveGood bool              // some commit's layout was good
	goodAt   string            // its commit
	err      error             // why the head's layout is not used; nil when good is the head's
	gen      uint64            // counts the changes of good and err
	seen     map[string]uint64 // per env, the gen its last audit took
}

func newRepoLayout(repo func() *gitrepo.Repo, log *slog.Logger, convention func(*layout.Layout) *layout.Layout) *repoLayout {
	return &repoLayout{repo: repo, log: log, convention: convention, seen: map[string]uint64{}}
}

// refresh reads the layout at the repository's head when the head moved since the last read.
// Resolving the head is a lookup of one ref (under the repository's lock; no object is read).
func (r *repoLayout) refresh() {
	repo := r.repo()
	if repo == nil {
		return
	}
	r.refreshMu.Lock()
	defer r.refreshMu.Unlock()
	head, err := repo.Resolve("HEAD")
	if err != nil {
		return // the audit fails on it, saying why
	}
	r.mu.Lock()
	same := head == r.head
	r.mu.Unlock()
	if same {
		return
	}
	l, err := readLayout(repo, head)
	switch {
	case err != nil:
		err = fmt.Errorf("the layout at %s does not parse: %w", gitrepo.Short(head), err)
	case l.File == "" && r.convention != nil:
		l = r.convention(l)
	case r.usable != nil:
		if uerr := r.usable(l); uerr != nil {
			err = fmt.Errorf("the layout at %s is not used: %w", gitrepo.Short(head), uerr)
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.head = head
	if err != nil {
		if r.err == nil || r.err.Error() != err.Error() {
			r.gen++
		}
		r.err = err
		holds := "none: the envs' audits fail until a commit's layout parses"
		if r.haveGood {
			holds = "the one at " + gitrepo.Short(r.goodAt)
		}
		r.log.Error("the repository's layout is not used; the last good one holds", "commit", gitrepo.Short(head), "err", err, "layout", holds)
		return
	}
	if r.err != nil || !r.haveGood || !reflect.DeepEqual(l, r.good) {
		r.gen++
		if r.haveGood {
			r.log.Info("the repository's layout changed", "commit", gitrepo.Short(head), "layout", describe(l))
		}
	}
	r.good, r.haveGood, r.goodAt, r.err = l, true, head, nil
}

// current is the last good layout (nil before one): File "" for the convention's envs.
func (r *repoLayout) current() *layout.Layout {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.good
}

// failing is the error every env's audit fails with: the head's layout is not used and no
// commit's was (the config's names could be other Applications than the env's).
func (r *repoLayout) failing() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.haveGood {
		return nil
	}
	return r.err
}

// headErr is why the head's layout is not used (nil when it is): the status shows it.
func (r *repoLayout) headErr() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}

// moved says whether the layout changed since env's last call: its audit is then full.
func (r *repoLayout) moved(env string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	moved := r.seen[env] != r.gen
	r.seen[env] = r.gen
	return moved
}

// describe names a layout for the log.
func describe(l *layout.Layout) string {
	return l.Describe() + ": " + strings.Join(l.Names(), ", ")
}

// readLayout reads the layout of repo at commit (layout.Read), reading only the files it needs.
// A file that lists no envs keeps the convention's, named by convention: File is then "".
func readLayout(repo *gitrepo.Repo, commit string) (*layout.Layout, error) {
	l, err := layout.Read(commitFiles{repo: repo, commit: commit})
	if err != nil {
		return nil, err
	}
	if l.File != "" {
		data, err := repo.ReadFile(commit, layout.LayoutFile)
		if err != nil {
			return nil, err
		}
		if parsed, err := layout.Parse(data); err == nil && len(parsed.Envs) == 0 {
			l.File = "" // the overlays' envs
		}
	}
	return l, nil
}

// commitFiles reads a commit's files one by one (layout.Files).
type commitFiles struct {
	repo   *gitrepo.Repo
	commit string
}

func (f commitFiles) ReadFile(rel string) ([]byte, error) { return f.repo.ReadFile(f.commit, rel) }

func (f commitFiles) ReadDir(rel string) ([]string, error) { return f.repo.ReadDir(f.commit, rel) }

// byConvention is the convention's layout l with the config's names: its envs are the
// cluster's (never Extra in another env's group), their roots and own Applications named by
// the config's prefixes.
func (c *Config) byConvention(l *layout.Layout) *layout.Layout {
	out := *l
	out.Envs = slices.Clone(l.Envs)
	for i := range out.Envs {
		e := &out.Envs[i]
		e.Root, e.Application = c.rootName(e.Name), c.appName(e.Name)
	}
	return &out
}

// naming sets cfg's functions that find each env's Applications: the config's prefixes and
// selections, the layout's at the branch head for the envs it lists (audit.UseLayoutFrom), and
// the config's roots over both.
func (d *Daemon) naming(cfg *audit.Config) {
	cfg.AppName, cfg.RootName = d.cfg.appName, d.cfg.rootName
	cfg.Select = func(env string) *audit.AppSelection {
		if sel, ok := d.cfg.Applications[env]; ok {
			return sel.selection(d.appNamespace())
		}
		return nil
	}
	audit.UseLayoutFrom(cfg, d.layout.current)
	appName, rootName := cfg.AppName, cfg.RootName
	cfg.AppName = func(env string) string {
		if _, ok := d.cfg.Roots[env]; ok {
			return d.cfg.appName(env)
		}
		return appName(env)
	}
	cfg.RootName = func(env string) string {
		if _, ok := d.cfg.Roots[env]; ok {
			return d.cfg.rootName(env)
		}
		return rootName(env)
	}
}

// appNamespace is where the envs' roots and own Applications live: the config's appNamespace,
// else the one namespace the layout gave the envs when the daemon started (startLayout).
func (d *Daemon) appNamespace() string {
	if d.appNS != "" {
		return d.appNS
	}
	return d.cfg.AppNamespace
}

// startLayout reads the layout at the branch head once the repository is open, and decides the
// namespace of the envs' Applications (Config.appNamespaceFor): the audits and the watch of
// Applications use it for the daemon's lifetime, and a later layout that moves the envs
// elsewhere is not used. Its error refuses to start.
func (d *Daemon) startLayout() error {
	if d.appNS != "" {
		return nil // decided at an earlier connect
	}
	d.layout.refresh()
	ns, err := d.cfg.appNamespaceFor(d.layout.current())
	if err != nil {
		return err
	}
	if err := d.cfg.checkSelectionNamespaces(ns); err != nil {
		return err
	}
	if l := d.layout.current(); l != nil && l.File != "" && ns == d.cfg.AppNamespace {
		for _, env := range d.cfg.Envs {
			if e, ok := l.Env(env); ok && e.Namespace != ns {
				d.log.Warn("argocdNamespace wins over the layout's namespace", "env", env, "argocdNamespace", ns, "layout", e.Namespace)
			}
		}
	}
	d.appNS = ns
	d.layout.usable = func(l *layout.Layout) error {
		got, err := d.cfg.appNamespaceFor(l)
		if err != nil {
			return err
		}
		if got != ns {
			return fmt.Errorf("its envs' Applications are in %s, and the daemon reads them in %s since it started: restart it to follow", got, ns)
		}
		return nil
	}
	return nil
}

// appNamespaceFor is the namespace of the Applications of the envs the daemon audits: the
// config's appNamespace when it sets one, else the namespace l gives those of its envs (argocd
// when l names none, or is nil). One Auditor reads one namespace: envs of l in different ones
// are an error naming them.
func (c *Config) appNamespaceFor(l *layout.Layout) (string, error) {
	def := c.AppNamespace
	if def == "" {
		def = "argocd"
	}
	if l == nil || l.File == "" || c.AppNamespace != "" && !c.appNamespaceDefault {
		return def, nil
	}
	ns, err := audit.LayoutNamespace(l, c.Envs)
	switch {
	case err != nil:
		return "", fmt.Errorf("%w: run one daemon per namespace, each with its envs", err)
	case ns == "":
		return def, nil
	}
	return ns, nil
}
