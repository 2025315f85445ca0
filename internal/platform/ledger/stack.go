package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"path"
	"time"

	"github.com/llm-gitops/platform/internal/engine/gitrepo"
	"github.com/llm-gitops/platform/internal/platform/gpustack"
)

// StackRecord says that an env ran a GPU stack triple healthy from HealthyAt: its GPU nodes up on
// the AMI and its inference Deployments available on the image, at Revision.
type StackRecord struct {
	Env string `json:"env"`
	gpustack.Triple
	Revision  string    `json:"revision"`
	HealthyAt time.Time `json:"healthyAt"`
}

// StackPath is where an env's GPU stack ledger lives (beside its model ledger).
func StackPath(env string) string { return path.Join("clusters", env, "gpu-stack-ledger.jsonl") }

// ParseStacks reads a GPU stack ledger (JSON Lines); each line needs an env, an AMI, an image, a
// revision and the time the triple became healthy, or the error names file and line.
func ParseStacks(file string, data []byte) ([]StackRecord, error) {
	return parseLines(file, data, func(_ int, r StackRecord) error {
		if r.Env == "" || r.AMI == "" || r.Image == "" || r.Revision == "" || r.HealthyAt.IsZero() {
			return fmt.Errorf("env, ami, image, revision and healthyAt are required")
		}
		if env := path.Base(path.Dir(file)); path.Base(file) == "gpu-stack-ledger.jsonl" && r.Env != env {
			// A record of another env in this file would count as this env's soak.
			return fmt.Errorf("env %q in %s's ledger", r.Env, env)
		}
		return nil
	})
}

// HealthySince is the earliest time the records say the triple ran healthy; false when never.
func HealthySince(records []StackRecord, t gpustack.Triple) (time.Time, bool) {
	var first time.Time
	for _, r := range records {
		if r.Triple.Same(t) && (first.IsZero() || r.HealthyAt.Before(first)) {
			first = r.HealthyAt
		}
	}
	return first, !first.IsZero()
}

// AppendStack commits rec to its env's GPU stack ledger on branch through Remote.Update, re-read
// at the branch head on every attempt. A triple the ledger already has since rec's time or
// earlier is not appended again (Result.NoChange); an earlier time is (the ledger keeps the
// earliest: HealthySince).
func AppendStack(ctx context.Context, remote *gitrepo.Remote, branch string, rec StackRecord, deadline time.Time) (gitrepo.Result, error) {
	if rec.Env == "" || rec.AMI == "" || rec.Image == "" || rec.Revision == "" || rec.HealthyAt.IsZero() {
		return gitrepo.Result{}, fmt.Errorf("append %s: env, ami, image, revision and healthyAt are required", StackPath(rec.Env))
	}
	if branch == "" {
		branch = "main"
	}
	file := StackPath(rec.Env)
	return remote.Update(ctx, gitrepo.UpdateRequest{
		Branch: branch, Author: Bot, Deadline: deadline,
		Message: fmt.Sprintf("ledger(%s): GPU stack healthy since %s: %s", rec.Env, rec.HealthyAt.UTC().Format(time.RFC3339), rec.Triple),
		Change: func(s *gitrepo.Snapshot) (map[string][]byte, error) {
			cur := s.Files[file]
			existing, err := ParseStacks(file, cur)
			if err != nil {
				return nil, err
			}
			if since, ok := HealthySince(existing, rec.Triple); ok && !rec.HealthyAt.Before(since) {
				return nil, nil
			}
			line, err := json.Marshal(rec)
			if err != nil {
				return nil, err
			}
			next := append([]byte(nil), cur...)
			if len(next) > 0 && next[len(next)-1] != '\n' {
				next = append(next, '\n')
			}
			return map[string][]byte{file: append(append(next, line...), '\n')}, nil
		},
	})
}
