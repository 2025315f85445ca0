package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"

	"github.com/go-git/go-billy/v5/osfs"
	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

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
