package notify

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"

	"github.com/llm-gitops/platform/internal/daemon/message"
	"github.com/llm-gitops/platform/internal/engine/adopt"
	"github.com/llm-gitops/platform/internal/platform/cost"

	"github.com/llm-gitops/platform/internal/daemon/episode"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

// DriftMessage announces one new drift item with its fix.
func DriftMessage(it Item, opts Options) message.Message {
	o := MaskSecrets(it.Object)
	app := opts.app(it.Env)
	if o.Application != "" {
		app = o.Application // in an env of several Applications, the one whose object it is
	}
	lines := []message.Line{{Label: "Env", Text: it.Env}, {Label: "Object", Text: o.APIVersion + " " + objectName(o)}}
	var title string
	switch {
	case o.Status == drift.Missing:
		title = fmt.Sprintf("Missing in %s: %s", it.Env, objectName(o))
		lines = append(lines,
			message.Line{Label: "Drift", Text: "declared in Git at " + it.Revision + " but absent from the cluster"})
		if a := o.Actor; a != nil {
			lines = append(lines, message.Line{Label: "Deleted by", Text: a.Person() + " (" + a.Verb + " at " + a.Time + ")" + a.NamedBy()})
		}
		lines = append(lines, restoreLine(app, o))
		if o.Cluster == "" { // the env's render applies to Argo CD's own cluster
			lines = append(lines, message.Line{Label: "or", Text: ApplyCommand(it.Env, it.Revision), Code: true})
		}
	case o.Status == drift.Extra:
		title = fmt.Sprintf("Extra object in %s: %s", it.Env, objectName(o))
		lines = append(lines, message.Line{Label: "Drift", Text: "in the cluster but not declared in Git at " + it.Revision})
		if o.Creator != nil {
			lines = append(lines, message.Line{Label: "Created by", Text: writerText(*o.Creator)})
		}
		lines = append(lines,
			message.Line{Label: "Restore Git's state", Text: DeleteCommand(o), Code: true},
			message.Line{Label: "Adopt into Git", Text: "add the live object to Git: export it (without status, managedFields, uid, resourceVersion) into overlays/" + it.Env + "/ and list it under resources: of overlays/" + it.Env + "/kustomization.yaml"})
	case len(o.Fields) == 0: // Argo CD flags it; the auditor's comparison shows no field
		title = fmt.Sprintf("Drift in %s: %s", it.Env, objectName(o))
		note := o.Note
		if note == "" {
			note = "OutOfSync without a field the auditor can show"
		}
		lines = append(lines,
			message.Line{Label: "Drift", Text: note},
			message.Line{Label: "Desired revision", Text: it.Revision},
			restoreLine(app, o))
	default:
		f := o.Fields[0]
		title = fmt.Sprintf("Drift in %s: %s %s", it.Env, objectName(o), f.Path)
		lines = append(lines,
			message.Line{Label: "Field", Text: f.Path},
			message.Line{Label: "Change", Text: f.Change + ": " + FormatValue(f.Desired) + " → " + FormatValue(f.Live) + " (Git → live)"},
			message.Line{Label: "Written by", Text: fieldWriterText(f)})
		if o.Cost != nil && cost.Costs(o.Kind, f.Path) { // said once: by the field that costs
			lines = append(lines, message.Line{Label: "Cost", Text: o.Cost.Note})
		}
		lines = append(lines,
			message.Line{Label: "Desired revision", Text: it.Revision},
			restoreLine(app, o))
		if !generated(o) && o.Cluster == "" {
			lines = append(lines, message.Line{Label: "or", Text: ApplyCommand(it.Env, it.Revision), Code: true})
		}
		lines = append(lines, adoptLine(it.Env, it.Revision, o, opts))
	}
	return newMessage(message.KindDrift, it.Env, title, lines, []string{it.Key}, opts)
}

// restoreLine is the "restore Git's state" line: an Argo CD sync of the object, or, for an
// Application an ApplicationSet generates (no Application syncs it), what its controller does.
func restoreLine(app string, o drift.Object) message.Line {
	const label = "Restore Git's state"
	if set, ok := strings.CutPrefix(o.Source, drift.GeneratedSource); ok {
		return message.Line{Label: label, Text: "ApplicationSet " + set + "'s controller writes it from its template: it restores the template's values itself unless the set is create-only or create-delete; then edit them back by hand"}
	}
	return message.Line{Label: label, Text: SyncCommand(app, o), Code: true}
}

// generated says an ApplicationSet generates o.
func generated(o drift.Object) bool { return strings.HasPrefix(o.Source, drift.GeneratedSource) }

// adoptLine is the "adopt into Git" line of a Modified object: a patch `git apply` accepts at
// the audited revision, or why there is none.
func adoptLine(env, revision string, o drift.Object, opts Options) message.Line {
	const label = "Adopt into Git"
	if o.Kind == "Secret" {
		return message.Line{Label: label, Text: "not generated for a Secret (values are never shown): re-encrypt the live value with your secrets workflow"}
	}
	if opts.ReadFile == nil {
		return message.Line{Label: label + " (overlay not read)", Text: "no patch: this auditor does not read the repository's files to write one against overlays/" + env + "/"}
	}
	var readErr error
	a, err := adopt.Group(env, revision, func(rev, name string) ([]byte, error) {
		data, err := opts.ReadFile(rev, name)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			readErr = err
		}
		return data, err
	}, o)
	switch {
	case err != nil && readErr != nil:
		return message.Line{Label: label + " (overlay not read)", Text: "no patch: " + err.Error()}
	case err != nil:
		return message.Line{Label: label, Text: "no patch: " + err.Error()}
	case a.Diff == "":
		return message.Line{Label: label, Text: "no patch: " + strings.Join(a.Notes, "; ")}
	}
	return message.Line{Label: label, Text: a.Diff, Code: true}
}

// NotAuditedRunbook is the runbook a not-audited message points to, under the repository's docs.
const NotAuditedRunbook = "docs/runbooks/AuditorApplicationNotAudited.md"

// NotAuditedMessage says an Application could not be audited, and why. It is titled as what it
// is, not as drift: its objects were not compared, so no drift in them is known or reported
// until an audit succeeds again; the drift its last audit found still stands.
func NotAuditedMessage(it Item, opts Options) message.Message {
	o := it.Object
	cause, _ := drift.NotAudited(&o)
	title := fmt.Sprintf("Not audited in %s: %s", it.Env, objectName(o))
	lines := []message.Line{{Label: "Env", Text: it.Env}, {Label: "Object", Text: o.APIVersion + " " + objectName(o)},
		{Label: "Cause", Text: message.Truncate(cause, 500)},
		{Label: "Meaning", Text: "its objects are not compared with Git until an audit succeeds: a hand edit to them is not reported meanwhile; the other Applications are audited"},
		{Label: "Runbook", Text: NotAuditedRunbook}}
	return newMessage(message.KindNotAudited, it.Env, title, lines, []string{it.Key}, opts)
}

// ResolvedMessage announces that a drift item went away.
func ResolvedMessage(it Item, opts Options) message.Message {
	o := it.Object
	title := fmt.Sprintf("Resolved in %s: %s", it.Env, objectName(o))
	if _, ok := drift.NotAudited(&o); ok {
		title = fmt.Sprintf("Audited again in %s: %s", it.Env, objectName(o))
	}
	lines := []message.Line{{Label: "Env", Text: it.Env}, {Label: "Object", Text: o.APIVersion + " " + objectName(o)}}
	if f := it.Field(); f != nil {
		title += " " + f.Path
		lines = append(lines, message.Line{Label: "Field", Text: f.Path})
	}
	now := "matches Git"
	if it.Revision != "" {
		now += " at " + it.Revision
	}
	if r := it.Resolution; r != nil {
		if r.How == episode.Overwritten {
			now = r.Summary()
		} else if summary := r.Summary(); summary != "" {
			now += "; " + summary
		}
	}
	lines = append(lines, message.Line{Label: "Was", Text: itemSummary(it)}, message.Line{Label: "Now", Text: now})
	return newMessage(message.KindResolved, it.Env, title, lines, []string{it.Key}, opts)
}

// itemSummary is a one-line description of an item.
func itemSummary(it Item) string {
	o := MaskSecrets(it.Object)
	if cause, ok := drift.NotAudited(&o); ok {
		return message.Truncate(objectName(o)+": not audited ("+cause+")", 300)
	}
	switch o.Status {
	case drift.Missing:
		if o.Actor != nil {
			return objectName(o) + ": missing (deleted by " + o.Actor.User + ")" + o.Actor.NamedBy()
		}
		return objectName(o) + ": missing"
	case drift.Extra:
		s := objectName(o) + ": extra"
		switch {
		case o.Actor != nil && o.Creator != nil && o.Creator.Manager != "":
			s += " (created by " + o.Actor.User + ", " + o.Creator.Manager + ")"
		case o.Actor != nil:
			s += " (created by " + o.Actor.User + ")"
		case o.Creator != nil && o.Creator.Manager != "":
			s += " (created by " + o.Creator.Manager + ")"
		}
		return s
	}
	if len(o.Fields) == 0 {
		if o.Status == "" { // rebuilt from a key (ItemFromKey): missing or extra, not known which
			return objectName(o) + ": drifted"
		}
		return objectName(o) + ": modified"
	}
	f := o.Fields[0]
	if f.Change == "" { // rebuilt from a key (ItemFromKey): no values
		s := objectName(o) + " " + f.Path
		if f.Manager != "" {
			s += " (" + f.Manager + ")"
		}
		return message.Truncate(s, 300)
	}
	s := objectName(o) + " " + f.Path + ": " + FormatValue(f.Desired) + " → " + FormatValue(f.Live)
	switch {
	case f.Actor != nil && f.Manager != "":
		s += " (" + f.Actor.User + ", " + f.Manager + ")" + f.Actor.NamedBy()
	case f.Actor != nil:
		s += " (" + f.Actor.User + ")" + f.Actor.NamedBy()
	case f.Manager != "":
		s += " (" + f.Manager + ")"
	case f.Change == drift.Removed:
		s += " (removed, writer unknown)"
	}
	return message.Truncate(s, 300)
}

// digestCosts are the costs of the folded items that change GPU capacity, each object's once
// (by the field that costs, as DriftMessage says it), listed or not: up to n lines, then how many
// more objects cost.
func digestCosts(items []Item, n int) []message.Line {
	var out []message.Line
	seen := map[string]bool{}
	for _, it := range items {
		o := it.Object
		f := it.Field()
		if o.Cost == nil || f == nil || !cost.Costs(o.Kind, f.Path) {
			continue
		}
		name := objectName(o)
		if seen[name] {
			continue
		}
		seen[name] = true
		out = append(out, message.Line{Label: "Cost", Text: name + ": " + o.Cost.Note})
	}
	if len(out) > n {
		more := len(out) - n
		out = append(out[:n], message.Line{Label: "Cost", Text: fmt.Sprintf("and %d more objects whose drift changes GPU capacity", more)})
	}
	return out
}

// DigestMessage folds many items of one env into one message: up to Options.MaxDigestItems
// lines, then "and K more". kind is message.KindDigest for new drift, message.KindResolved for resolutions.
func DigestMessage(env string, kind message.Kind, items []Item, opts Options) message.Message {
	n := opts.maxItems()
	var title string
	if kind == message.KindResolved {
		title = fmt.Sprintf("%d drifts resolved in %s", len(items), env)
	} else {
		kind = message.KindDigest
		title = fmt.Sprintf("%d new drifts in %s", len(items), env)
	}
	lines := []message.Line{{Label: "Env", Text: env}}
	keys := make([]string, 0, len(items))
	revs := map[string]bool{}
	for i, it := range items {
		keys = append(keys, it.Key)
		revs[it.Revision] = true
		if i < n {
			lines = append(lines, message.Line{Text: "• " + itemSummary(it)})
		}
	}
	if len(items) > n {
		lines = append(lines, message.Line{Text: fmt.Sprintf("and %d more", len(items)-n)})
	}
	if kind == message.KindDigest {
		lines = append(lines, digestCosts(items, n)...)
	}
	if kind == message.KindDigest && len(items) > 0 {
		lines = append(lines, message.Line{Label: "Restore Git's state", Text: "argocd app sync " + shellQuote(opts.app(env)), Code: true})
		if len(revs) == 1 {
			lines = append(lines, message.Line{Label: "or", Text: ApplyCommand(env, items[0].Revision), Code: true})
		}
	}
	return newMessage(kind, env, title, lines, keys, opts)
}
