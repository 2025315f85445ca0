// Package ledger keeps the model ledger: one record per change of a served model (a vLLM
// Deployment) in an environment — added, changed (weights, share, image, replicas), retired, or
// changed back by a rollback (a revert commit). The ledger is stored in Git as JSON Lines,
// clusters/<env>/model-ledger.jsonl (outside every path Argo CD syncs), appended by commits of a
// bot identity; it is also derivable from history alone (Rebuild), and the two must agree.
package ledger

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path"
	"strings"
	"time"
)

// Kind is what happened to a served model version.
type Kind string

// The event kinds.
const (
	KindAdded    Kind = "added"
	KindChanged  Kind = "changed"
	KindRetired  Kind = "retired"
	KindRollback Kind = "rollback"
)

// The fields a KindChanged record (or a rollback) lists in Changes.
const (
	FieldWeights  = "weights"
	FieldShare    = "share"
	FieldImage    = "image"
	FieldReplicas = "replicas"
	FieldVersion  = "version"
)

// Metrics is a snapshot of a served version's latency and errors, read from Prometheus when the
// record was written (see Prometheus.Snapshot). A nil field means Prometheus had no data.
type Metrics struct {
	// Window is the rate window of the queries (e.g. 5m); At the evaluation time.
	Window string    `json:"window"`
	At     time.Time `json:"at"`
	// E2E request latency quantiles, seconds.
	E2EP50 *float64 `json:"e2eP50Seconds,omitempty"`
	E2EP95 *float64 `json:"e2eP95Seconds,omitempty"`
	// Time to first token quantiles, seconds.
	TTFTP50 *float64 `json:"ttftP50Seconds,omitempty"`
	TTFTP95 *float64 `json:"ttftP95Seconds,omitempty"`
	// ErrorRate is the fraction (0..1) of finished requests that were aborted:
	// rate(vllm:request_success_total{finished_reason="abort"}) / rate(vllm:request_success_total).
	ErrorRate *float64 `json:"errorRate,omitempty"`
	// CostPer1kTokens is what 1,000 tokens (prompt + generated) cost at the window's throughput:
	// the replicas serving (pods reporting vllm:num_requests_running) × GPUs a replica × the
	// price of a GPU-hour ÷ tokens an hour × 1,000. Idle replicas are paid for too.
	CostPer1kTokens *float64 `json:"costUSDPer1kTokens,omitempty"`
}

// Record is one ledger entry: the state of one served model version after a commit changed it.
type Record struct {
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	// Effect is, for a rollback, what the revert did to this version (added, changed, retired).
	Effect Kind `json:"effect,omitempty"`
	// Changes lists the changed fields of a changed record (or a rollback that changed one).
	Changes []string `json:"changes,omitempty"`

	Env string `json:"env"`
	// Model is the served model name (annotation platform.llm/model, e.g. qwen).
	Model string `json:"model"`
	// Deployment serving the version; Version is its pod label platform.llm/model-version
	// (the Deployment name when the label is absent).
	Deployment string `json:"deployment"`
	Namespace  string `json:"namespace,omitempty"`
	Version    string `json:"version"`

	WeightsURI      string `json:"weightsURI,omitempty"`
	WeightsRevision string `json:"weightsRevision,omitempty"`
	Image           string `json:"image,omitempty"`
	// SharePercent is the share of the model's traffic sent to this Deployment by the HTTPRoute
	// (backendRef weight / sum of the rule's weights × 100; 100 without a route).
	SharePercent float64 `json:"sharePercent"`
	// Replicas is the warm minimum: the ScaledObject's minReplicaCount, else spec.replicas.
	Replicas int64 `json:"replicas"`
	// Cost prices a replica, for the metrics' cost per 1k tokens.
	Cost

	// Revision is the manifest commit; Overlay the rendered path (overlays/<env>).
	Revision string `json:"revision"`
	// Release is, for a pinned env, the commit its overlay was rendered at: Revision is then the
	// promotion commit that moved the pin (revert it to roll back).
	Release     string    `json:"release,omitempty"`
	Overlay     string    `json:"overlay"`
	Author      string    `json:"author"`
	Subject     string    `json:"subject"`
	CommittedAt time.Time `json:"committedAt"`
	// Reverts is, for a rollback, the reverted commit.
	Reverts string `json:"reverts,omitempty"`
	// Forced is the reason a promotion commit gave for going past the violations auditor check
	// found in it (its Promote-Forced trailer).
	Forced string `json:"forced,omitempty"`

	// SyncedAt is when the revision was first seen synced live (filled by the daemon; empty in a
	// rebuild). Metrics is an optional snapshot taken when the record was written.
	SyncedAt *time.Time `json:"syncedAt,omitempty"`
	Metrics  *Metrics   `json:"metrics,omitempty"`
}

// Key identifies a served version within an environment (Deployments are per model).
func (r Record) Key() string { return r.Model + "/" + r.Deployment }

// ID is the stable id of a record: a short hash of env, model, deployment, version and commit.
func ID(env, model, deployment, version, revision string) string {
	h := sha256.Sum256([]byte(strings.Join([]string{env, model, deployment, version, revision}, "\x00")))
	return hex.EncodeToString(h[:])[:12]
}

// Path is where an environment's ledger lives in the repository.
func Path(env string) string { return path.Join("clusters", env, "model-ledger.jsonl") }

// ParseError reports a malformed ledger line.
type ParseError struct {
	File string
	Line int
	Err  error
}

func (e *ParseError) Error() string { return fmt.Sprintf("%s:%d: %v", e.File, e.Line, e.Err) }
func (e *ParseError) Unwrap() error { return e.Err }

// Parse reads a JSON Lines ledger; empty lines are skipped. Every line must be a record with an
// id, a known kind, an env, a model and a revision, and ids must be unique; otherwise the error is
// a *ParseError naming file and line.
func Parse(file string, data []byte) ([]Record, error) {
	seen := map[string]int{}
	return parseLines(file, data, func(n int, r Record) error {
		if err := r.validate(); err != nil {
			return err
		}
		if first, dup := seen[r.ID]; dup {
			return fmt.Errorf("duplicate id %s (first on line %d)", r.ID, first)
		}
		seen[r.ID] = n
		return nil
	})
}

// parseLines reads JSON Lines of T (empty lines skipped, unknown fields and trailing data
// refused), each then judged by check with its line number; any error is a *ParseError naming
// file and line.
func parseLines[T any](file string, data []byte, check func(line int, v T) error) ([]T, error) {
	var out []T
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	n := 0
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var v T
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			return nil, &ParseError{File: file, Line: n, Err: err}
		}
		if dec.More() {
			return nil, &ParseError{File: file, Line: n, Err: fmt.Errorf("trailing data after the record")}
		}
		if err := check(n, v); err != nil {
			return nil, &ParseError{File: file, Line: n, Err: err}
		}
		out = append(out, v)
	}
	if err := sc.Err(); err != nil {
		return nil, &ParseError{File: file, Line: n + 1, Err: err}
	}
	return out, nil
}

func (r Record) validate() error {
	switch {
	case r.ID == "":
		return fmt.Errorf("record without id")
	case r.Env == "" || r.Model == "" || r.Deployment == "" || r.Revision == "":
		return fmt.Errorf("record %s: env, model, deployment and revision are required", r.ID)
	}
	switch r.Kind {
	case KindAdded, KindChanged, KindRetired:
	case KindRollback:
		if r.Reverts == "" {
			return fmt.Errorf("record %s: rollback without reverts", r.ID)
		}
	default:
		return fmt.Errorf("record %s: unknown kind %q", r.ID, r.Kind)
	}
	return nil
}

// Marshal writes records as JSON Lines.
func Marshal(records []Record) ([]byte, error) {
	var b bytes.Buffer
	for _, r := range records {
		line, err := json.Marshal(r)
		if err != nil {
			return nil, fmt.Errorf("record %s: %w", r.ID, err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.Bytes(), nil
}

// Derived returns the records without the fields only a live writer fills (SyncedAt, Metrics):
// what Rebuild can reproduce.
func Derived(records []Record) []Record {
	out := make([]Record, len(records))
	for i, r := range records {
		r.SyncedAt, r.Metrics = nil, nil
		out[i] = r
	}
	return out
}
