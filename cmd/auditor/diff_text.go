package main

import (
	"fmt"
	"io"
	"time"

	"github.com/llm-gitops/platform/internal/engine/drift"
	"github.com/llm-gitops/platform/internal/engine/gitrepo"
)

// writeText prints one line per drifted field: object, path, desired → live, manager, how long ago.
func writeText(w io.Writer, rep *drift.Report, now time.Time) {
	fmt.Fprintf(w, "env %s, revision %s", rep.Env, gitrepo.Short(rep.Revision))
	if rep.PendingSync {
		fmt.Fprintf(w, " (pending sync: Git is at %s)", gitrepo.Short(rep.HeadRevision))
	}
	fmt.Fprintln(w)
	group := len(rep.Applications) > 1
	if group {
		writeApplications(w, rep.Applications)
	}
	for _, o := range rep.Objects {
		id := objectID(o.Kind, o.Namespace, o.Name)
		if o.Cluster != "" {
			id += " on cluster " + o.Cluster
		}
		if group && o.Application != "" {
			id += " [" + o.Application + "]"
		}
		if o.ArgoCD != nil {
			id += argoLabel(o.ArgoCD)
		}
		switch o.Status {
		case drift.Missing:
			by := ""
			if o.Actor != nil {
				by = " — deleted by " + personAt(o.Actor)
			}
			fmt.Fprintf(w, "%-8s %s: in Git, not in the cluster%s\n", o.Status, id, by)
		case drift.Extra:
			by := ""
			switch {
			case o.Creator != nil && o.Actor != nil:
				by = " — created by " + o.Actor.Person() + " with " + who(o.Creator.Manager, o.Creator.Operation, o.Creator.Subresource, o.Creator.Time, now)
			case o.Creator != nil:
				by = " — created by " + who(o.Creator.Manager, o.Creator.Operation, o.Creator.Subresource, o.Creator.Time, now)
			case o.Actor != nil:
				by = " — created by " + personAt(o.Actor)
			}
			fmt.Fprintf(w, "%-8s %s: in the cluster, not in Git%s\n", o.Status, id, by)
			if o.Note != "" {
				fmt.Fprintf(w, "           %s\n", o.Note)
			}
		case drift.Unknown:
			fmt.Fprintf(w, "%-8s %s: not compared — %s\n", o.Status, id, o.Note)
		default:
			fmt.Fprintf(w, "%-8s %s\n", o.Status, id)
			if o.Note != "" {
				fmt.Fprintf(w, "           %s\n", o.Note)
			}
			if o.Schema != "" {
				fmt.Fprintf(w, "           compared without the cluster's schema (%s)\n", o.Schema)
			}
			if o.Cost != nil {
				fmt.Fprintf(w, "           cost: %s\n", o.Cost.Note)
			}
			writeFields(w, o.Fields, now)
		}
	}
	for _, a := range rep.ArgoCDOnly {
		fmt.Fprintf(w, "argo-cd  %s %s/%s: OutOfSync for Argo CD only — %s\n", a.Kind, a.Namespace, a.Name, a.Note)
	}
	for _, note := range rep.Notes {
		fmt.Fprintf(w, "note: %s\n", note)
	}
	n, f := rep.Counts()
	unaudited := ""
	if u := rep.NotAuditedCount(); u > 0 {
		unaudited = fmt.Sprintf("; %d Applications not audited (their objects not compared)", u)
	}
	switch {
	case n == 0 && unaudited == "":
		fmt.Fprintln(w, "in sync: no drift")
		return
	case n == 0:
		fmt.Fprintf(w, "no drift in what was audited%s\n", unaudited)
		return
	}
	fmt.Fprintf(w, "%d objects drifted, %d fields%s\n", n, f, unaudited)
}

// writeApplications writes a line for each of apps: what it audited, or why it did not.
func writeApplications(w io.Writer, apps []drift.Application) {
	for _, app := range apps {
		if app.Error != "" {
			fmt.Fprintf(w, "Application %s: not audited — %s\n", app.Name, app.Error)
			continue
		}
		via := ""
		if app.Via != "" {
			via = ", via " + app.Via
		}
		if app.Cluster != "" {
			via += ", on cluster " + app.Cluster
		}
		fmt.Fprintf(w, "Application %s (%s at %s%s): %d objects, %d drifted\n", app.Name, app.Path, gitrepo.Short(app.Revision), via, app.Objects, app.Drifted)
	}
}

// writeFields writes a line for each drifted field: its path, change, values and who wrote it.
func writeFields(w io.Writer, fields []drift.Field, now time.Time) {
	for _, f := range fields {
		by := who(f.Manager, f.Operation, f.Subresource, f.Time, now)
		if f.Actor != nil {
			by = f.Actor.Person() + " with " + by + f.Actor.NamedBy()
			if f.Manager == "" {
				by = personAt(f.Actor)
			}
		}
		if f.Borrowed != "" {
			by += " (under " + f.Borrowed + "'s name: not that controller)"
		}
		fmt.Fprintf(w, "           %-50s %s  %s → %s  by %s\n", f.Path, f.Change, short(f.Desired), short(f.Live), by)
	}
}

// personAt names an actor and the request they made: "alice (patch 2025-03-01T12:00:00Z)".
func personAt(a *drift.Actor) string {
	return a.Person() + " (" + a.Verb + " " + a.Time + ")" + a.NamedBy()
}

// who names a field manager, its operation and subresource, and how long ago it wrote.
func who(manager, op, sub, t string, now time.Time) string {
	if manager == "" {
		return "unknown writer (a removal leaves no managedFields entry, and no watch saw it happen)"
	}
	s := manager + " (" + op
	if sub != "" {
		s += ", subresource " + sub
	}
	s += ")"
	if ts, err := time.Parse(time.RFC3339, t); err == nil {
		s += " " + ago(now.Sub(ts)) + " ago"
	}
	return s
}

func ago(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

func argoLabel(v *drift.ArgoVerdict) string {
	state := "Synced"
	if v.OutOfSync {
		state = "OutOfSync"
	}
	if v.Note != "" {
		return "  [Argo CD: " + state + "; " + v.Note + "]"
	}
	return "  [Argo CD: " + state + "]"
}
