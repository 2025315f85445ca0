package ledger

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/engine/render"
)

// Bot is the identity of ledger commits.
var Bot = gitrepo.Person{Name: "auditor-bot", Email: "auditor@llm-platform.local"}

// TrailerSyncedRevision names, on a ledger commit, the manifest revision the ledger is
// up to date with.
const TrailerSyncedRevision = "Synced-Revision"

// Read returns the ledger of env at rev of repo (no file: no records).
func Read(repo *gitrepo.Repo, env, rev string) ([]Record, error) {
	snap, err := repo.Snapshot(rev)
	if err != nil {
		return nil, err
	}
	return fromSnapshot(snap, env)
}

func fromSnapshot(snap *gitrepo.Snapshot, env string) ([]Record, error) {
	data, ok, err := snap.File(Path(env)) // a ledger grows past the size snapshots hold
	if err != nil || !ok {
		return nil, err
	}
	return Parse(Path(env), data)
}

// Envs lists the environments having a ledger file at rev.
func Envs(repo *gitrepo.Repo, rev string) ([]string, error) {
	snap, err := repo.Snapshot(rev)
	if err != nil {
		return nil, err
	}
	var envs []string
	for p := range snap.Files {
		dir, file := path.Split(p)
		if file == "model-ledger.jsonl" && strings.HasPrefix(dir, "clusters/") && strings.Count(dir, "/") == 2 {
			envs = append(envs, strings.TrimSuffix(strings.TrimPrefix(dir, "clusters/"), "/"))
		}
	}
	sort.Strings(envs)
	return envs, nil
}

// AppendRequest describes records to append to an environment's ledger.
type AppendRequest struct {
	Env     string
	Branch  string // default main
	Records []Record
	// SyncedRevision is the manifest revision the records bring the ledger up to (the commit's
	// Synced-Revision trailer); default: the Revision of the last record.
	SyncedRevision string
	// Author defaults to Bot.
	Author   gitrepo.Person
	Deadline time.Time
	Backoff  gitrepo.Backoff
}

// Append commits the records to clusters/<env>/model-ledger.jsonl on the branch through
// Remote.Update: on every attempt the ledger is re-read at the branch head and only the records
// whose ids are not there yet are appended, so concurrent writers lose nothing and duplicate
// nothing. When the file at the head does not parse, nothing is written and the *ParseError is
// returned. Appended is how many records the commit added (0: no commit).
func Append(ctx context.Context, remote *gitrepo.Remote, req AppendRequest) (res gitrepo.Result, appended int, err error) {
	if req.Env == "" {
		return res, 0, errors.New("append: env is required")
	}
	for _, r := range req.Records {
		if r.Env != req.Env {
			return res, 0, fmt.Errorf("append: record %s is for env %q, not %q", r.ID, r.Env, req.Env)
		}
		if err := r.validate(); err != nil {
			return res, 0, fmt.Errorf("append: %w", err)
		}
	}
	if len(req.Records) == 0 {
		return gitrepo.Result{NoChange: true}, 0, nil
	}
	if req.Branch == "" {
		req.Branch = "main"
	}
	if req.Author.Name == "" {
		req.Author = Bot
	}
	synced := req.SyncedRevision
	if synced == "" {
		synced = req.Records[len(req.Records)-1].Revision
	}
	file := Path(req.Env)
	var added []Record
	ureq := gitrepo.UpdateRequest{
		Branch: req.Branch, Author: req.Author, Deadline: req.Deadline, Backoff: req.Backoff,
		Trailers: []gitrepo.Trailer{{Key: TrailerSyncedRevision, Value: synced}},
		Change: func(s *gitrepo.Snapshot) (map[string][]byte, error) {
			added = nil
			cur := s.Files[file]
			existing, err := Parse(file, cur)
			if err != nil {
				return nil, err
			}
			have := make(map[string]bool, len(existing))
			for _, r := range existing {
				have[r.ID] = true
			}
			for _, r := range req.Records {
				if !have[r.ID] {
					have[r.ID] = true
					added = append(added, r)
				}
			}
			if len(added) == 0 {
				return nil, nil
			}
			tail, err := Marshal(added)
			if err != nil {
				return nil, err
			}
			next := append([]byte(nil), cur...)
			if len(next) > 0 && next[len(next)-1] != '\n' {
				next = append(next, '\n')
			}
			return map[string][]byte{file: append(next, tail...)}, nil
		},
	}
	ureq.Message = fmt.Sprintf("ledger(%s): model records up to %s", req.Env, gitrepo.Short(synced))
	res, err = remote.Update(ctx, ureq)
	if err != nil || res.NoChange {
		return res, 0, err
	}
	return res, len(added), nil
}

// Replace commits the whole ledger of env (used by `ledger rebuild` without --dry-run). The
// daemon-only fields (SyncedAt, Metrics) of records already in the file are kept by id. A
// malformed existing file is not overwritten unless force is set.
func Replace(ctx context.Context, remote *gitrepo.Remote, env, branch string, records []Record, synced string, force bool) (gitrepo.Result, error) {
	if branch == "" {
		branch = "main"
	}
	file := Path(env)
	return remote.Update(ctx, gitrepo.UpdateRequest{
		Branch: branch, Author: Bot,
		Message:  fmt.Sprintf("ledger(%s): rebuild from history (%s)", env, plural(len(records), "record")),
		Trailers: []gitrepo.Trailer{{Key: TrailerSyncedRevision, Value: synced}},
		Change: func(s *gitrepo.Snapshot) (map[string][]byte, error) {
			existing, err := Parse(file, s.Files[file])
			if err != nil && !force {
				return nil, err
			}
			old := map[string]Record{}
			for _, r := range existing {
				old[r.ID] = r
			}
			out := make([]Record, len(records))
			for i, r := range records {
				if o, ok := old[r.ID]; ok {
					r.SyncedAt, r.Metrics = o.SyncedAt, o.Metrics
				}
				out[i] = r
			}
			data, err := Marshal(out)
			if err != nil {
				return nil, err
			}
			return map[string][]byte{file: data}, nil
		},
	})
}

// SyncRequest brings an environment's ledger up to a manifest revision.
type SyncRequest struct {
	Env    string
	Branch string // default main
	// Revision to bring the ledger up to (default: the branch head).
	Revision string
	// SyncedAt, when set, is stamped on the new records (the daemon's "first seen synced").
	SyncedAt time.Time
	// Metrics, when set, is called for each new record that still serves (not retired).
	Metrics  func(ctx context.Context, r Record) (*Metrics, error)
	Deadline time.Time
	// FetchTimeout, when set, bounds opening the remote (its clone or fetch): a stalled server
	// fails the sync instead of hanging it.
	FetchTimeout time.Duration
	// Renders, when set, renders each commit through this cache and its Worker (the daemon's
	// render workers); nil renders in process.
	Renders *render.Cache
}

// SyncResult is the outcome of Sync.
type SyncResult struct {
	Result   gitrepo.Result
	Records  []Record // computed since the last synced revision
	Appended int
}

// Sync computes the records of the commits since the revision named by the newest ledger commit's
// Synced-Revision trailer (the whole history when none) up to req.Revision and appends them.
func Sync(ctx context.Context, remote *gitrepo.Remote, req SyncRequest) (SyncResult, error) {
	var out SyncResult
	if req.Branch == "" {
		req.Branch = "main"
	}
	octx, cancel := ctx, context.CancelFunc(func() {})
	if req.FetchTimeout > 0 {
		octx, cancel = context.WithTimeout(ctx, req.FetchTimeout)
	}
	repo, err := remote.Open(octx)
	cancel()
	if err != nil {
		return out, err
	}
	to := req.Revision
	if to == "" {
		to = req.Branch
	}
	head, err := repo.Resolve(req.Branch)
	if err != nil {
		return out, err
	}
	// Refuse early on a malformed ledger: nothing will be written.
	if _, err := Read(repo, req.Env, head); err != nil {
		return out, err
	}
	from, err := LastSynced(ctx, repo, req.Env, head)
	if err != nil {
		return out, err
	}
	recs, err := records(ctx, repo, req.Env, from, to, req.Renders)
	if err != nil {
		return out, err
	}
	for i := range recs {
		if !req.SyncedAt.IsZero() {
			t := req.SyncedAt.UTC()
			recs[i].SyncedAt = &t
		}
		if req.Metrics != nil && recs[i].Kind != KindRetired && recs[i].Effect != KindRetired {
			m, err := req.Metrics(ctx, recs[i])
			if err != nil {
				return out, fmt.Errorf("metrics for %s: %w", recs[i].Deployment, err)
			}
			recs[i].Metrics = m
		}
	}
	out.Records = recs
	target, err := repo.Resolve(to)
	if err != nil {
		return out, err
	}
	out.Result, out.Appended, err = Append(ctx, remote, AppendRequest{Env: req.Env, Branch: req.Branch,
		Records: recs, SyncedRevision: target, Deadline: req.Deadline})
	return out, err
}

// LastSynced returns the Synced-Revision of the newest commit up to rev that changed env's ledger
// ("" when none).
func LastSynced(ctx context.Context, repo *gitrepo.Repo, env, rev string) (string, error) {
	hist, err := repo.Log(ctx, rev, Path(env))
	if err != nil {
		return "", err
	}
	for _, c := range hist {
		if v, ok := c.Trailer(TrailerSyncedRevision); ok && v != "" {
			if _, err := repo.Resolve(v); err == nil {
				return v, nil
			}
		}
	}
	return "", nil
}

// RollbackRequest describes a rollback by revert.
type RollbackRequest struct {
	Branch string // default main
	// Envs whose ledgers get the rollback records (default: every env with an overlay at the
	// branch head).
	Envs     []string
	Author   gitrepo.Person // of the revert; default Bot
	Deadline time.Time
	// Metrics is passed to Sync (e.g. a snapshot of what serves after the rollback).
	Metrics func(ctx context.Context, r Record) (*Metrics, error)
}

// RollbackResult is the outcome of Rollback.
type RollbackResult struct {
	Revert gitrepo.Result
	Synced map[string]SyncResult // per env
}

// Rollback reverts sha on the branch (Remote.Revert: line-level, pushed with retry; a
// *gitrepo.RevertConflictError names the later commit that prevents it), then syncs the ledgers
// of req.Envs (default: the envs that have one at the branch), which appends rollback records
// (reverts: sha) for every served version the revert changed.
func Rollback(ctx context.Context, remote *gitrepo.Remote, sha string, req RollbackRequest) (RollbackResult, error) {
	out := RollbackResult{Synced: map[string]SyncResult{}}
	if req.Branch == "" {
		req.Branch = "main"
	}
	if req.Author.Name == "" {
		req.Author = Bot
	}
	var err error
	out.Revert, err = remote.Revert(ctx, sha, gitrepo.RevertRequest{Branch: req.Branch, Author: req.Author, Deadline: req.Deadline})
	if err != nil {
		return out, err
	}
	envs := req.Envs
	if len(envs) == 0 { // the envs that keep a ledger: a rollback starts none
		repo, err := remote.Open(ctx)
		if err != nil {
			return out, err
		}
		if envs, err = Envs(repo, req.Branch); err != nil {
			return out, err
		}
	}
	var errs []error
	for _, env := range envs {
		res, err := Sync(ctx, remote, SyncRequest{Env: env, Branch: req.Branch, Revision: out.Revert.Commit,
			Metrics: req.Metrics, Deadline: req.Deadline})
		if err != nil {
			errs = append(errs, fmt.Errorf("ledger %s: %w", env, err))
			continue
		}
		out.Synced[env] = res
	}
	return out, errors.Join(errs...)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
