// Package mcp is the auditor as a Model Context Protocol server: read-only tools an assistant
// calls to ask what drifted, who did it, what it costs and how to put it back, answered from
// what the CLI and the daemon already compute (check, the ledger, the schedule, the capacity
// arithmetic, the drift report, blame and episodes). No tool writes to Git or the cluster, and
// Secret values never leave: a Secret's fields say only that they changed.
//
// The tools that read only Git work without a cluster; the others go through Cluster, which
// the daemon implements from its last audits and `auditor mcp` by auditing on each call.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/google/jsonschema-go/jsonschema"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/engine/blame"
	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// ErrNoCluster is the answer of a cluster tool when no cluster is configured.
var ErrNoCluster = errors.New("no cluster is configured: this tool reads the live cluster " +
	"(start auditor mcp with --kubeconfig/--context, or ask auditor serve at /mcp); " +
	"check, ledger_at, schedule_plan and capacity read only Git")

// Cluster is what the cluster tools read. The daemon answers from its last audits, the CLI by
// auditing the env on each call.
type Cluster interface {
	// Envs lists the envs that can be asked about.
	Envs() []string
	// Report is the env's drift report, as GET /api/v1/drift and `auditor diff -o json` give it.
	Report(ctx context.Context, env string) (*drift.Report, error)
	// Blame is the commit behind each field of one object and the writes to the live object;
	// cluster names the member cluster it lives on ("" for Argo CD's own).
	Blame(ctx context.Context, env, cluster string, ref blame.Ref) (*blame.Blame, error)
	// Episodes are the open episodes of env (every env when "") and up to limit ended ones,
	// most recent first; an error when this process keeps no history of drift.
	Episodes(ctx context.Context, env string, limit int) (open, ended []episode.Episode, err error)
}

// Options configure the server.
type Options struct {
	// Repo opens the repository the Git tools read (and explain writes its adopt patch against).
	Repo func(ctx context.Context) (*gitrepo.Repo, error)
	// Cluster answers the cluster tools; nil answers them with ErrNoCluster.
	Cluster Cluster
	// Tools, when not empty, are the only tools served (by name).
	Tools []string
	// Version is the server's version, as the client sees it.
	Version string
}

// Tools are the names of every tool the server has, in the order it lists them.
var Tools = []string{"check", "ledger_at", "schedule_plan", "capacity", "drift", "explain", "blame", "episodes"}

// New returns the server with its tools (those opts.Tools names, when it names any). A name
// it does not know is an error listing the tools.
func New(opts Options) (*sdk.Server, error) {
	for i, t := range opts.Tools {
		t = strings.TrimSpace(t) // "check, capacity" as a person types it
		opts.Tools[i] = t
		if !slices.Contains(Tools, t) {
			return nil, fmt.Errorf("mcp: no tool %q (tools: %s)", t, strings.Join(Tools, ", "))
		}
	}
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	s := sdk.NewServer(&sdk.Implementation{Name: "auditor", Version: version}, &sdk.ServerOptions{
		Instructions: "The auditor compares what Git declares with what runs in the cluster. " +
			"Ask drift for an env's drifted objects, explain for one object's fields, who changed them and how to restore or adopt them, " +
			"blame for the commit behind each field, episodes for the history of drift. Every tool is read-only.",
	})
	t := &tools{opts: opts}
	on := func(name string) bool { return len(opts.Tools) == 0 || slices.Contains(opts.Tools, name) }
	t.addGit(s, on)
	t.addCluster(s, on)
	return s, nil
}

// tools hold what the tool handlers read.
type tools struct{ opts Options }

func (t *tools) repo(ctx context.Context) (*gitrepo.Repo, error) {
	if t.opts.Repo == nil {
		return nil, errors.New("no repository is configured (--repo)")
	}
	return t.opts.Repo(ctx)
}

func (t *tools) cluster() (Cluster, error) {
	if t.opts.Cluster == nil {
		return nil, ErrNoCluster
	}
	return t.opts.Cluster, nil
}

// readOnly is a tool that changes nothing, outside the process included, answering out.
func readOnly(name, title, description string, out *jsonschema.Schema) *sdk.Tool {
	f := false
	return &sdk.Tool{Name: name, Title: title, Description: description, OutputSchema: out,
		Annotations: &sdk.ToolAnnotations{Title: title, ReadOnlyHint: true, DestructiveHint: &f, IdempotentHint: true}}
}

// ownJSON are the schemas of the types that write JSON of their own, which the SDK would infer
// from their Go fields.
var ownJSON = map[reflect.Type]*jsonschema.Schema{
	reflect.TypeFor[drift.FieldPath](): {Type: "array", Items: &jsonschema.Schema{Type: "string"},
		Description: `the field's path as managedFields spells its elements ("f:spec", "k:{\"name\":\"vllm\"}")`},
}

// schemaOf is the JSON schema of T's answers.
func schemaOf[T any]() *jsonschema.Schema {
	s, err := jsonschema.For[T](&jsonschema.ForOptions{TypeSchemas: ownJSON})
	if err != nil {
		panic(fmt.Sprintf("mcp: the schema of %T: %v", *new(T), err)) // a type of this module: a test finds it
	}
	return s
}
