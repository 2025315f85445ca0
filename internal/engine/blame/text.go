package blame

import (
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	"github.com/llm-gitops/platform/internal/engine/auditlog"
	"github.com/llm-gitops/platform/internal/engine/drift"
)

// Widths of the text tables' columns (longer values are cut with "…").
const (
	pathWidth    = 64
	valueWidth   = 40
	personWidth  = 60
	subjectWidth = 72
)

// WriteText prints b for people: a header, a row per field (path, Git value, commit, author,
// date, subject; under it the drift: live value and who), then the writes to the live object,
// newest first, with old → new for each field they changed.
func WriteText(w io.Writer, b *Blame) error {
	p := &printer{w: w}
	if b.Application != "" {
		p.printf("%s in env %s, Application %s (%s), at %.12s\n", b.Object, b.Env, b.Application, b.Path, b.Revision)
	} else {
		p.printf("%s in env %s at %.12s\n", b.Object, b.Env, b.Revision)
	}
	p.printf("history: %d commits walked, back to %.12s%s\n", b.History.Commits, b.History.Oldest, completeness(b.History))
	if b.Live != nil {
		p.printf("live: %s\n", liveLine(b))
	}
	p.printf("\n")
	pw, vw := len("FIELD"), len("GIT")
	for _, f := range b.Fields {
		pw = max(pw, min(pathWidth, utf8.RuneCountInString(f.Path)))
		vw = max(vw, min(valueWidth, utf8.RuneCountInString(drift.ShortValue(f.Git, valueWidth))))
	}
	p.printf("%-*s  %-*s  %-8s  %-12s  %-10s  %s\n", pw, "FIELD", vw, "GIT", "COMMIT", "AUTHOR", "DATE", "SUBJECT")
	for _, f := range b.Fields {
		git := drift.ShortValue(f.Git, valueWidth)
		if f.Commit == nil {
			git = "(not in Git)"
		}
		p.printf("%s\n", strings.TrimRight(fmt.Sprintf("%-*s  %-*s  %s", pw, drift.Cut(f.Path, pathWidth), vw, git, commitCols(f.Commit)), " "))
		for _, d := range f.Drift {
			p.printf("  ↳ %s\n", driftLine(f, d))
		}
	}
	if b.Live != nil && b.Live.AuditEvents {
		p.printf("\nwrites to the live object, newest first:\n")
		if len(b.Writes) == 0 {
			p.printf("  none held in the audit events\n")
		}
		ww, tw := len("PERSON"), len("TOOL")
		for _, wr := range b.Writes {
			ww = max(ww, min(personWidth, utf8.RuneCountInString(writer(wr))))
			tw = max(tw, min(personWidth, utf8.RuneCountInString(tool(wr))))
		}
		if len(b.Writes) > 0 {
			p.printf("  %-20s  %-*s  %-*s  %-6s  %s\n", "TIME", ww, "PERSON", tw, "TOOL", "VERB", "CHANGES")
		}
		for _, wr := range b.Writes {
			lines := changeLines(wr)
			if wr.From == "admission" {
				lines[0] += " (admitted; made only if the live object shows it)"
			}
			p.printf("  %-20s  %-*s  %-*s  %-6s  %s\n", wr.Time, ww, drift.Cut(writer(wr), personWidth), tw, drift.Cut(tool(wr), personWidth), wr.Verb, lines[0])
			for _, l := range lines[1:] {
				p.printf("  %-20s  %-*s  %-*s  %-6s  %s\n", "", ww, "", tw, "", "", l)
			}
		}
	}
	if len(b.Notes) > 0 {
		p.printf("\nnotes:\n")
		for _, n := range b.Notes {
			p.printf("  - %s\n", n)
		}
	}
	return p.err
}

type printer struct {
	w   io.Writer
	err error
}

func (p *printer) printf(format string, args ...any) {
	if p.err == nil {
		_, p.err = fmt.Fprintf(p.w, format, args...)
	}
}

func completeness(h History) string {
	s := " (complete)"
	if !h.Complete {
		s = " (stopped at the commit limit: ^commits set the value there or earlier)"
	}
	if n := len(h.Skipped); n > 0 {
		s += fmt.Sprintf(", %d commits did not render", n)
	}
	return s
}

func liveLine(b *Blame) string {
	l := b.Live
	var parts []string
	switch {
	case !l.Found:
		parts = append(parts, "not in the cluster")
	case l.Status == "":
		parts = append(parts, "in the cluster, not audited")
	}
	if l.Status != "" {
		s := l.Status
		if l.Status == InSync {
			s = "in sync"
		}
		parts = append(parts, fmt.Sprintf("%s in the audit of %.12s", s, l.AuditedRevision))
	}
	if l.AuditEvents {
		parts = append(parts, fmt.Sprintf("%d writes in the audit events", len(b.Writes)))
	} else {
		parts = append(parts, "no audit events (--audit-log): writes and people unknown")
	}
	return strings.Join(parts, "; ")
}

func commitCols(c *Commit) string {
	if c == nil {
		return ""
	}
	sha := fmt.Sprintf("%.7s", c.SHA)
	if c.Boundary {
		sha = "^" + fmt.Sprintf("%.7s", c.SHA)
	}
	return fmt.Sprintf("%-8s  %-12s  %-10s  %s", sha, drift.Cut(c.Author, 12), c.Date.Format("2006-01-02"), drift.Cut(c.Subject, subjectWidth))
}

// driftLine says what the cluster has at a drifted field and who wrote it.
func driftLine(f Field, d drift.Field) string {
	var s string
	switch d.Change {
	case drift.Removed:
		s = "live: removed"
	case drift.Added:
		s = "live: " + drift.ShortValue(d.Live, valueWidth) + " (added)"
	default:
		s = "live: " + drift.ShortValue(d.Live, valueWidth)
	}
	if d.Path != f.Path {
		s = d.Path + " " + s
	}
	writer := ""
	if d.Manager != "" {
		writer = d.Manager + " (" + d.Operation
		if d.Subresource != "" {
			writer += ", subresource " + d.Subresource
		}
		writer += ")"
		if d.Time != "" {
			writer += " " + d.Time
		}
	}
	switch {
	case d.Actor != nil && writer != "":
		s += " — by " + d.Actor.Person() + " with " + writer + d.Actor.NamedBy()
	case d.Actor != nil:
		s += " — by " + d.Actor.Person() + " (" + d.Actor.Verb + " " + d.Actor.Time + ")" + d.Actor.NamedBy()
	case writer != "":
		s += " — by " + writer
	default:
		s += " — writer unknown"
	}
	return s
}

// writer is who made a write: the user, and whom they acted as.
func writer(w Write) string {
	if w.Via != "" {
		return w.User + " (via " + w.Via + ")"
	}
	return drift.Person(w.User, w.ImpersonatedUser)
}

// tool is the field manager of a write, and the subresource it wrote.
func tool(w Write) string {
	if w.Subresource != "" {
		return w.Tool + " (" + w.Subresource + ")"
	}
	return w.Tool
}

// changeLines are a write's changes, one per line.
func changeLines(w Write) []string {
	switch {
	case w.ChangesFrom == auditlog.Created:
		return []string{"created the object"}
	case w.ChangesFrom == "" && w.Verb == "delete":
		return []string{"deleted the object"}
	case w.ChangesFrom == "":
		return []string{"(changes not known)"}
	}
	if len(w.Changes) == 0 && w.ChangesTruncated {
		return []string{"(changes not kept: memory bound)"}
	}
	if len(w.Changes) == 0 {
		return []string{"(no field changed)"}
	}
	var out []string
	for _, c := range w.Changes {
		old := drift.ShortValue(c.Old, valueWidth)
		switch c.Change {
		case "set":
			old = "?"
		case drift.Added:
			old = "(none)"
		}
		nw := drift.ShortValue(c.New, valueWidth)
		if c.Change == drift.Removed {
			nw = "(none)"
		}
		out = append(out, c.Path+": "+old+" → "+nw)
	}
	if w.ChangesTruncated {
		out = append(out, "(more changes not kept)")
	}
	return out
}
