package mcp

import (
	"context"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/daemon/notify"
	"github.com/llm-gitops/platform/internal/engine/adopt"
	"github.com/llm-gitops/platform/internal/engine/argocd"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

// Explanation is the answer of explain: one object of an env's last audit.
type Explanation struct {
	Env      string `json:"env"`
	Revision string `json:"revision"`
	// Status is the object's drift (Modified, Missing, Extra, Unknown), NotDrifted when the
	// env's report does not list it (Note says what that can mean).
	Status      string `json:"status"`
	APIVersion  string `json:"apiVersion,omitempty"`
	Kind        string `json:"kind"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name"`
	Cluster     string `json:"cluster,omitempty"`
	Application string `json:"application,omitempty"`
	// Source is what its Application renders (where an adopt patch goes).
	Source string           `json:"source,omitempty"`
	Fields []ExplainedField `json:"fields"`
	// Creator and Actor: who made an Extra object, who deleted a Missing one.
	Creator *drift.Writer `json:"creator,omitempty"`
	Actor   *drift.Actor  `json:"actor,omitempty"`
	// ArgoCD is Argo CD's own verdict on the object.
	ArgoCD *drift.ArgoVerdict `json:"argocd,omitempty"`
	Cost   *drift.Cost        `json:"cost,omitempty"`
	Note   string             `json:"note,omitempty"`
	// Episodes are the object's open drift episodes (when the server keeps them).
	Episodes []episode.Episode `json:"episodes,omitempty"`
	// Restore are the commands that put Git's state back.
	Restore []string `json:"restore,omitempty"`
	// Adopt is the patch that makes Git say what runs instead, or why there is none.
	Adopt *Adoption `json:"adopt,omitempty"`
}

// ExplainedField is one drifted field. A Secret's Git and Live are left out: Secret says it
// changed.
type ExplainedField struct {
	Path   string `json:"path"`
	Change string `json:"change"`
	Git    any    `json:"git,omitempty"`
	Live   any    `json:"live,omitempty"`
	Secret bool   `json:"secret,omitempty"`
	// Manager is the field manager of the write, Person the user the audit events name.
	Manager   string       `json:"manager,omitempty"`
	Operation string       `json:"operation,omitempty"`
	Time      string       `json:"time,omitempty"`
	Person    string       `json:"person,omitempty"`
	Actor     *drift.Actor `json:"actor,omitempty"`
	// Disables says what a hand edit of an Argo CD Application's field turns off.
	Disables string `json:"disables,omitempty"`
}

// Adoption is the change that adopts the live state into Git.
type Adoption struct {
	// Patch is a diff git apply accepts at the audited revision; empty when nothing can be.
	Patch string   `json:"patch,omitempty"`
	Notes []string `json:"notes,omitempty"`
}

func (t *tools) explain(ctx context.Context, _ *sdk.CallToolRequest, in ObjectInput) (*sdk.CallToolResult, *Explanation, error) {
	if in.Kind == "" || in.Name == "" {
		return nil, nil, errors.New("kind and name are required")
	}
	rep, err := t.report(ctx, in.Env)
	if err != nil {
		return nil, nil, err
	}
	o, err := findObject(rep, in)
	if err != nil {
		return nil, nil, err
	}
	ex := &Explanation{Env: rep.Env, Revision: rep.Revision, Status: NotDrifted, Kind: in.Kind, Namespace: in.Namespace, Name: in.Name, Fields: []ExplainedField{}}
	if o == nil {
		ex.Note = notDrifted(rep)
		return nil, ex, nil
	}
	ex.Status, ex.APIVersion, ex.Kind, ex.Namespace, ex.Cluster = o.Status, o.APIVersion, o.Kind, o.Namespace, o.Cluster
	ex.Application, ex.Source, ex.Creator, ex.Actor, ex.ArgoCD, ex.Cost, ex.Note = o.Application, o.Source, o.Creator, o.Actor, o.ArgoCD, o.Cost, o.Note
	for _, f := range o.Fields {
		ex.Fields = append(ex.Fields, explainField(o.Kind, f))
	}
	ex.Restore = restore(rep, *o)
	ex.Adopt = t.adopt(ctx, rep, *o)
	if c, err := t.cluster(); err == nil {
		if open, _, err := c.Episodes(ctx, rep.Env, 0); err == nil {
			for _, e := range open {
				if e.Kind == o.Kind && e.Name == o.Name && e.Namespace == o.Namespace && e.Cluster == o.Cluster {
					ex.Episodes = append(ex.Episodes, e)
				}
			}
		}
	}
	return nil, ex, nil
}

// NotDrifted is explain's status of an object the env's report does not list: in sync when the
// env renders it and its Application was audited; the report lists no object in sync, so a
// misspelt or foreign object reads the same.
const NotDrifted = "NotDrifted"

// notDrifted says what an object the report does not list may be, naming the Applications that
// were not audited (their objects were not compared).
func notDrifted(rep *drift.Report) string {
	note := "not among the env's drifted objects: in sync if one of its Applications renders it (kind as the API names it, such as Deployment, and its exact name)"
	var skipped []string
	for _, a := range rep.Applications {
		if a.Error != "" {
			skipped = append(skipped, a.Name)
		}
	}
	if len(skipped) > 0 {
		note += "; not audited, so not compared: the objects of " + strings.Join(skipped, ", ")
	}
	return note
}

// findObject is the report's object in names, nil when the report has none of it (in sync). A
// name several namespaces have is an error naming them.
func findObject(rep *drift.Report, in ObjectInput) (*drift.Object, error) {
	var found []*drift.Object
	for i, o := range rep.Objects {
		if strings.EqualFold(o.Kind, in.Kind) && o.Name == in.Name && (in.Namespace == "" || o.Namespace == in.Namespace) &&
			(in.Cluster == "" || o.Cluster == in.Cluster) {
			found = append(found, &rep.Objects[i])
		}
	}
	switch len(found) {
	case 0:
		return nil, nil
	case 1:
		return found[0], nil
	}
	var where []string
	for _, o := range found {
		at := o.Namespace
		if o.Cluster != "" {
			at += " on " + o.Cluster
		}
		where = append(where, at)
	}
	return nil, fmt.Errorf("%s %s is in several places (%s): name its namespace or cluster", in.Kind, in.Name, strings.Join(where, ", "))
}

func explainField(kind string, f drift.Field) ExplainedField {
	out := ExplainedField{Path: f.Path, Change: f.Change, Git: f.Desired, Live: f.Live, Actor: f.Actor,
		Manager: f.Manager, Operation: f.Operation, Time: f.Time}
	if f.Actor != nil {
		out.Person, out.Time = f.Actor.User, f.Actor.Time
	}
	if kind == "Application" {
		out.Disables = argocd.HandEditDisables(f.Path, f.Live)
	}
	if kind == "Secret" { // its values never leave, masked or not
		out.Git, out.Live, out.Secret = nil, nil, true
	}
	return out
}

// restore are the commands that put Git's state back, as the chat messages give them.
func restore(rep *drift.Report, o drift.Object) []string {
	switch {
	case o.Status == drift.Extra:
		return []string{notify.DeleteCommand(o)}
	case strings.HasPrefix(o.Source, drift.GeneratedSource):
		return nil // its ApplicationSet's controller writes it
	}
	out := []string{}
	if o.Application != "" {
		out = append(out, notify.SyncCommand(o.Application, o))
	}
	if o.Cluster == "" {
		out = append(out, notify.ApplyCommand(rep.Env, rep.Revision))
	}
	return out
}

// adopt is the patch adopting a Modified object's live state into Git, as auditor diff -o patch
// writes it.
func (t *tools) adopt(ctx context.Context, rep *drift.Report, o drift.Object) *Adoption {
	switch {
	case o.Status != drift.Modified || len(o.Fields) == 0:
		return &Adoption{Notes: []string{"no field to adopt (" + o.Status + ")"}}
	case o.Kind == "Secret":
		return &Adoption{Notes: []string{"values of a Secret are never shown: re-encrypt the live value with your secrets workflow"}}
	}
	repo, err := t.repo(ctx)
	if err != nil {
		return &Adoption{Notes: []string{"the repository is not read: " + err.Error()}}
	}
	a, err := adopt.GroupIn(rep.Env, rep.Revision, adopt.Repo{ReadAt: repo.ReadFile, Tree: repo.Snapshot}, o)
	if err != nil {
		return &Adoption{Notes: []string{err.Error()}}
	}
	return &Adoption{Patch: a.Diff, Notes: a.Notes}
}
