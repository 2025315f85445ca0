package mcp

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/daemon/notify"
	"github.com/llm-gitops/platform/internal/engine/blame"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

// DriftInput asks for an env's drift, or one Application's.
type DriftInput struct {
	Env         string `json:"env,omitempty" jsonschema:"the environment (may be left out when there is one)"`
	Application string `json:"application,omitempty" jsonschema:"only this Application of the env: its name, or namespace/name"`
}

// ObjectInput names one object of an env.
type ObjectInput struct {
	Env       string `json:"env,omitempty" jsonschema:"the environment (may be left out when there is one)"`
	Kind      string `json:"kind" jsonschema:"the object's kind, e.g. Deployment"`
	Name      string `json:"name" jsonschema:"the object's name"`
	Namespace string `json:"namespace,omitempty" jsonschema:"the object's namespace, when the name is not unique"`
	Cluster   string `json:"cluster,omitempty" jsonschema:"the cluster it lives on, as reports name it, when the env spans several"`
}

// EpisodesInput picks episodes of drift.
type EpisodesInput struct {
	Env    string `json:"env,omitempty" jsonschema:"only this environment"`
	Person string `json:"person,omitempty" jsonschema:"only drift this person (audit events' user) or field manager made"`
	Kind   string `json:"kind,omitempty" jsonschema:"only objects of this kind"`
	Name   string `json:"name,omitempty" jsonschema:"only objects of this name"`
	Since  string `json:"since,omitempty" jsonschema:"only episodes open at or after this time, RFC 3339"`
	Until  string `json:"until,omitempty" jsonschema:"only episodes begun before this time, RFC 3339"`
	Limit  int    `json:"limit,omitempty" jsonschema:"at most this many ended episodes (default 100)"`
}

// Episodes is the answer of episodes: the open ones, oldest first, and the ended ones, the most
// recently ended first.
type Episodes struct {
	Open  []episode.Episode `json:"open"`
	Ended []episode.Episode `json:"ended"`
}

func (t *tools) addCluster(s *sdk.Server, on func(string) bool) {
	if on("drift") {
		sdk.AddTool(s, readOnly("drift", "Drift of an env",
			"What runs differently from Git in an env (or one Application): each drifted object and field, Git's and the live value, "+
				"the field manager and the person who wrote it and when, what the drift costs. The report of auditor diff -o json; Secret values are masked.", schemaOf[drift.Report]()), t.drift)
	}
	if on("explain") {
		sdk.AddTool(s, readOnly("explain", "Explain one object's drift",
			"One object: each drifted field's Git and live value, who changed it and when, its open episodes, Argo CD's own verdict, "+
				"the command that restores Git's state and the patch that adopts the live state into Git. A Secret's fields say only that they changed.", schemaOf[Explanation]()), t.explain)
	}
	if on("blame") {
		sdk.AddTool(s, readOnly("blame", "Blame one object",
			"The Git commit behind each field of one object, its drift, and the writes to the live object (the JSON of auditor blame -o json).", schemaOf[blame.Blame]()), t.blame)
	}
	if on("episodes") {
		sdk.AddTool(s, readOnly("episodes", "History of drift",
			"Open and ended drift episodes: when each drift began, who made it, and how it ended (reverted, synced, adopted into Git, overwritten).", schemaOf[Episodes]()), t.episodes)
	}
}

// report is the env's report (the one env when env is empty), Secret values masked.
func (t *tools) report(ctx context.Context, env string) (*drift.Report, error) {
	c, err := t.cluster()
	if err != nil {
		return nil, err
	}
	if env, err = pickEnv(c, env); err != nil {
		return nil, err
	}
	rep, err := c.Report(ctx, env)
	if err != nil {
		return nil, err
	}
	out := *rep
	out.Objects = make([]drift.Object, len(rep.Objects))
	for i, o := range rep.Objects {
		out.Objects[i] = notify.MaskSecrets(o)
	}
	return &out, nil
}

// pickEnv is env when the cluster knows it, the one env when env is empty and there is one.
func pickEnv(c Cluster, env string) (string, error) {
	envs := c.Envs()
	if env == "" && len(envs) == 1 {
		return envs[0], nil
	}
	switch {
	case env == "" && len(envs) == 0:
		return "", errors.New("env is required")
	case env == "" || len(envs) > 0 && !slices.Contains(envs, env):
		return "", fmt.Errorf("env: name one of %s", strings.Join(envs, ", "))
	}
	return env, nil
}

func (t *tools) drift(ctx context.Context, _ *sdk.CallToolRequest, in DriftInput) (*sdk.CallToolResult, *drift.Report, error) {
	rep, err := t.report(ctx, in.Env)
	if err != nil || in.Application == "" {
		return nil, rep, err
	}
	rep, err = rep.OnlyApplication(in.Application)
	return nil, rep, err
}

func (t *tools) blame(ctx context.Context, _ *sdk.CallToolRequest, in ObjectInput) (*sdk.CallToolResult, *blame.Blame, error) {
	c, err := t.cluster()
	if err != nil {
		return nil, nil, err
	}
	env, err := pickEnv(c, in.Env)
	if err != nil {
		return nil, nil, err
	}
	if in.Kind == "" || in.Name == "" {
		return nil, nil, errors.New("kind and name are required")
	}
	ref, err := blame.ParseRef(in.Kind+"/"+in.Name, in.Namespace)
	if err != nil {
		return nil, nil, err
	}
	b, err := c.Blame(ctx, env, in.Cluster, ref)
	if err != nil {
		return nil, nil, err
	}
	return nil, maskBlame(b), nil
}

// maskBlame masks the live values of a Secret's drift (blame already redacts Git's).
func maskBlame(b *blame.Blame) *blame.Blame {
	if b.Object.Kind != "Secret" {
		return b
	}
	out := *b
	out.Fields = make([]blame.Field, len(b.Fields))
	for i, f := range b.Fields {
		f.Drift = notify.MaskSecrets(drift.Object{Kind: "Secret", Fields: f.Drift}).Fields
		out.Fields[i] = f
	}
	return &out
}

func (t *tools) episodes(ctx context.Context, _ *sdk.CallToolRequest, in EpisodesInput) (*sdk.CallToolResult, Episodes, error) {
	c, err := t.cluster()
	if err != nil {
		return nil, Episodes{}, err
	}
	since, err1 := timeOr(in.Since, "since")
	until, err2 := timeOr(in.Until, "until")
	if err := errors.Join(err1, err2); err != nil {
		return nil, Episodes{}, err
	}
	if in.Since == "" {
		since = time.Time{}
	}
	limit := in.Limit
	if limit <= 0 {
		limit = 100
	}
	open, ended, err := c.Episodes(ctx, in.Env, 0)
	if err != nil {
		return nil, Episodes{}, err
	}
	pick := func(e episode.Episode) bool {
		person := e.Writer.Manager
		if e.Actor != nil {
			person = e.Actor.User
		}
		return (in.Person == "" || in.Person == person || in.Person == e.Writer.Manager) &&
			(in.Kind == "" || strings.EqualFold(in.Kind, e.Kind)) && (in.Name == "" || in.Name == e.Name) &&
			e.Start.Before(until) && (e.End == nil || !e.End.At.Before(since))
	}
	out := Episodes{Open: []episode.Episode{}, Ended: []episode.Episode{}}
	for _, e := range open {
		if pick(e) {
			out.Open = append(out.Open, e)
		}
	}
	for _, e := range ended {
		if pick(e) && len(out.Ended) < limit {
			out.Ended = append(out.Ended, e)
		}
	}
	return nil, out, nil
}
