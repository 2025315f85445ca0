package report

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/llm-gitops/platform/internal/drift"
	"github.com/llm-gitops/platform/internal/episode"
)

// Kind is what a Message announces.
type Kind string

// Message kinds.
const (
	KindDrift    Kind = "drift"    // one new drift
	KindResolved Kind = "resolved" // drift that went away
	KindDigest   Kind = "digest"   // many new drifts folded together
)

// Line is one line of a message: an optional label and a text, shown as code when Code is set
// (commands, diffs). Texts are plain: each sink escapes them for its own markup.
type Line struct {
	Label string `json:"label,omitempty"`
	Text  string `json:"text"`
	Code  bool   `json:"code,omitempty"`
}

// Message is a sink-independent notification. It is what the Outbox stores.
type Message struct {
	// ID identifies the message's content: a hash of its kind and dedupe keys.
	ID    string `json:"id"`
	Kind  Kind   `json:"kind"`
	Env   string `json:"env"`
	Title string `json:"title"`
	Lines []Line `json:"lines"`
	// Keys are the dedupe keys (see ItemKey) of the drift items the message announces.
	Keys []string `json:"keys"`
	// Link points at the Argo CD application, when Options.ArgoCDURL is set.
	Link string `json:"link,omitempty"`
}

// Options shape messages.
type Options struct {
	// ArgoCDURL is the Argo CD UI base URL; when set messages link <url>/applications/<app>.
	ArgoCDURL string
	// AppName maps an env to its Argo CD application; default "llm-"+env.
	AppName func(env string) string
	// ReadFile reads a file of the repository at a revision (name slash-separated from its root;
	// an absent file is an error wrapping fs.ErrNotExist). The adopt patch is written against the
	// overlay's files at the audited revision; without ReadFile a message offers none.
	ReadFile func(revision, name string) ([]byte, error)
	// MaxDigestItems is how many items a digest lists before "and K more"; default 10.
	MaxDigestItems int
}

func (o Options) app(env string) string {
	if o.AppName != nil {
		return o.AppName(env)
	}
	return "llm-" + env
}

func (o Options) link(env string) string {
	if o.ArgoCDURL == "" {
		return ""
	}
	return strings.TrimRight(o.ArgoCDURL, "/") + "/applications/" + o.app(env)
}

func (o Options) maxItems() int {
	if o.MaxDigestItems > 0 {
		return o.MaxDigestItems
	}
	return 10
}

// newMessage fills ID and Link.
func newMessage(kind Kind, env, title string, lines []Line, keys []string, opts Options) Message {
	keys = append([]string(nil), keys...)
	sort.Strings(keys)
	h := sha256.New()
	h.Write([]byte(kind))
	for _, k := range keys {
		h.Write([]byte{0})
		h.Write([]byte(k))
	}
	m := Message{ID: hex.EncodeToString(h.Sum(nil)[:12]), Kind: kind, Env: env, Title: title, Lines: lines, Keys: keys, Link: opts.link(env)}
	if m.Link != "" {
		m.Lines = append(m.Lines, Line{Label: "Argo CD", Text: m.Link})
	}
	return m
}

// objectName is "Kind namespace/name" (or "Kind name" when cluster-scoped).
func objectName(o drift.Object) string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// FormatValue renders a field value compactly (JSON, at most 200 characters).
func FormatValue(v any) string {
	if v == nil {
		return "(none)"
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	s := fmt.Sprint(v)
	if err := enc.Encode(v); err == nil {
		s = strings.TrimSuffix(buf.String(), "\n")
	}
	return truncate(s, 200)
}

// truncate cuts s to at most n runes, marking the cut with "…".
func truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}

// fieldWriterText is writerText for a drifted field; an unknown remover is explained, since a
// removal leaves no managedFields entry to name.
func fieldWriterText(f drift.Field) string {
	if a := f.Actor; a != nil {
		user := a.User
		if a.ImpersonatedUser != "" {
			user = a.User + " (as " + a.ImpersonatedUser + ")"
		}
		if f.Manager == "" {
			return user + " (" + a.Verb + " at " + a.Time + ", from the audit log)"
		}
		return user + " with " + writerText(f.Writer)
	}
	if f.Manager == "" && f.Change == drift.Removed {
		return "unknown (a removal leaves no managedFields entry and no watched update named its writer)"
	}
	return writerText(f.Writer)
}

// writerText renders who wrote a field: manager (operation, subresource) at time.
func writerText(w drift.Writer) string {
	if w.Manager == "" {
		return "unknown manager"
	}
	s := w.Manager
	var how []string
	if w.Operation != "" {
		how = append(how, w.Operation)
	}
	if w.Subresource != "" {
		how = append(how, "subresource "+w.Subresource)
	}
	if len(how) > 0 {
		s += " (" + strings.Join(how, ", ") + ")"
	}
	if w.Time != "" {
		s += " at " + w.Time
	}
	return s
}

// group returns the API group of apiVersion ("" for the core group).
func group(apiVersion string) string {
	g, _, ok := strings.Cut(apiVersion, "/")
	if !ok {
		return ""
	}
	return g
}

// SyncCommand is the Argo CD command that syncs one resource back to Git's state.
func SyncCommand(app string, o drift.Object) string {
	res := group(o.APIVersion) + ":" + o.Kind + ":"
	if o.Namespace != "" {
		res += o.Namespace + "/"
	}
	return "argocd app sync " + shellQuote(app) + " --resource " + shellQuote(res+o.Name)
}

// ApplyCommand is the alternative to SyncCommand without Argo CD: render the env at the synced
// revision and server-side apply it as Argo CD's field manager.
func ApplyCommand(env, revision string) string {
	return "auditor render --env " + shellQuote(env) + " --revision " + shellQuote(revision) +
		" | kubectl apply --server-side --field-manager=argocd-controller --force-conflicts -f -"
}

// DeleteCommand deletes an object Git does not declare.
func DeleteCommand(o drift.Object) string {
	s := "kubectl delete " + shellQuote(strings.ToLower(o.Kind))
	if o.Namespace != "" {
		s += " -n " + shellQuote(o.Namespace)
	}
	return s + " " + shellQuote(o.Name)
}

// shellQuote single-quotes s unless it only holds characters safe in a shell word.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./:=@,+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// DriftMessage announces one new drift item with its fix.
func DriftMessage(it Item, opts Options) Message {
	o := MaskSecrets(it.Object)
	app := opts.app(it.Env)
	lines := []Line{{Label: "Env", Text: it.Env}, {Label: "Object", Text: o.APIVersion + " " + objectName(o)}}
	var title string
	switch {
	case o.Status == drift.Missing:
		title = fmt.Sprintf("Missing in %s: %s", it.Env, objectName(o))
		lines = append(lines,
			Line{Label: "Drift", Text: "declared in Git at " + it.Revision + " but absent from the cluster"},
			Line{Label: "Restore Git's state", Text: SyncCommand(app, o), Code: true},
			Line{Label: "or", Text: ApplyCommand(it.Env, it.Revision), Code: true})
	case o.Status == drift.Extra:
		title = fmt.Sprintf("Extra object in %s: %s", it.Env, objectName(o))
		lines = append(lines, Line{Label: "Drift", Text: "in the cluster but not declared in Git at " + it.Revision})
		if o.Creator != nil {
			lines = append(lines, Line{Label: "Created by", Text: writerText(*o.Creator)})
		}
		lines = append(lines,
			Line{Label: "Restore Git's state", Text: DeleteCommand(o), Code: true},
			Line{Label: "Adopt into Git", Text: "add the live object to Git: export it (without status, managedFields, uid, resourceVersion) into overlays/" + it.Env + "/ and list it under resources: of overlays/" + it.Env + "/kustomization.yaml"})
	case len(o.Fields) == 0: // Argo CD flags it; the auditor's comparison shows no field
		title = fmt.Sprintf("Drift in %s: %s", it.Env, objectName(o))
		note := o.Note
		if note == "" {
			note = "OutOfSync without a field the auditor can show"
		}
		lines = append(lines,
			Line{Label: "Drift", Text: note},
			Line{Label: "Desired revision", Text: it.Revision},
			Line{Label: "Restore Git's state", Text: SyncCommand(app, o), Code: true})
	default:
		f := o.Fields[0]
		title = fmt.Sprintf("Drift in %s: %s %s", it.Env, objectName(o), f.Path)
		lines = append(lines,
			Line{Label: "Field", Text: f.Path},
			Line{Label: "Change", Text: f.Change + ": " + FormatValue(f.Desired) + " → " + FormatValue(f.Live) + " (Git → live)"},
			Line{Label: "Written by", Text: fieldWriterText(f)},
			Line{Label: "Desired revision", Text: it.Revision},
			Line{Label: "Restore Git's state", Text: SyncCommand(app, o), Code: true},
			Line{Label: "or", Text: ApplyCommand(it.Env, it.Revision), Code: true})
		lines = append(lines, adoptLine(it.Env, it.Revision, o, opts))
	}
	return newMessage(KindDrift, it.Env, title, lines, []string{it.Key}, opts)
}

// adoptLine is the "adopt into Git" line of a Modified object: a patch `git apply` accepts at
// the audited revision, or why there is none.
func adoptLine(env, revision string, o drift.Object, opts Options) Line {
	const label = "Adopt into Git"
	if o.Kind == "Secret" {
		return Line{Label: label, Text: "not generated for a Secret (values are never shown): re-encrypt the live value with your secrets workflow"}
	}
	if opts.ReadFile == nil {
		return Line{Label: label + " (overlay not read)", Text: "no patch: this auditor does not read the repository's files to write one against overlays/" + env + "/"}
	}
	var readErr error
	a, err := AdoptPatch(env, func(name string) ([]byte, error) {
		data, err := opts.ReadFile(revision, name)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			readErr = err
		}
		return data, err
	}, o)
	switch {
	case err != nil && readErr != nil:
		return Line{Label: label + " (overlay not read)", Text: "no patch: " + err.Error()}
	case err != nil:
		return Line{Label: label, Text: "no patch: " + err.Error()}
	case a.Diff == "":
		return Line{Label: label, Text: "no patch: " + strings.Join(a.Notes, "; ")}
	}
	return Line{Label: label, Text: a.Diff, Code: true}
}

// ResolvedMessage announces that a drift item went away.
func ResolvedMessage(it Item, opts Options) Message {
	o := it.Object
	title := fmt.Sprintf("Resolved in %s: %s", it.Env, objectName(o))
	lines := []Line{{Label: "Env", Text: it.Env}, {Label: "Object", Text: o.APIVersion + " " + objectName(o)}}
	if f := it.Field(); f != nil {
		title += " " + f.Path
		lines = append(lines, Line{Label: "Field", Text: f.Path})
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
	lines = append(lines, Line{Label: "Was", Text: itemSummary(it)}, Line{Label: "Now", Text: now})
	return newMessage(KindResolved, it.Env, title, lines, []string{it.Key}, opts)
}

// itemSummary is a one-line description of an item.
func itemSummary(it Item) string {
	o := MaskSecrets(it.Object)
	switch o.Status {
	case drift.Missing:
		if o.Actor != nil {
			return objectName(o) + ": missing (deleted by " + o.Actor.User + ")"
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
		return truncate(s, 300)
	}
	s := objectName(o) + " " + f.Path + ": " + FormatValue(f.Desired) + " → " + FormatValue(f.Live)
	switch {
	case f.Actor != nil && f.Manager != "":
		s += " (" + f.Actor.User + ", " + f.Manager + ")"
	case f.Actor != nil:
		s += " (" + f.Actor.User + ")"
	case f.Manager != "":
		s += " (" + f.Manager + ")"
	case f.Change == drift.Removed:
		s += " (removed, writer unknown)"
	}
	return truncate(s, 300)
}

// DigestMessage folds many items of one env into one message: up to Options.MaxDigestItems
// lines, then "and K more". kind is KindDigest for new drift, KindResolved for resolutions.
func DigestMessage(env string, kind Kind, items []Item, opts Options) Message {
	n := opts.maxItems()
	var title string
	if kind == KindResolved {
		title = fmt.Sprintf("%d drifts resolved in %s", len(items), env)
	} else {
		kind = KindDigest
		title = fmt.Sprintf("%d new drifts in %s", len(items), env)
	}
	lines := []Line{{Label: "Env", Text: env}}
	keys := make([]string, 0, len(items))
	revs := map[string]bool{}
	for i, it := range items {
		keys = append(keys, it.Key)
		revs[it.Revision] = true
		if i < n {
			lines = append(lines, Line{Text: "• " + itemSummary(it)})
		}
	}
	if len(items) > n {
		lines = append(lines, Line{Text: fmt.Sprintf("and %d more", len(items)-n)})
	}
	if kind == KindDigest && len(items) > 0 {
		lines = append(lines, Line{Label: "Restore Git's state", Text: "argocd app sync " + shellQuote(opts.app(env)), Code: true})
		if len(revs) == 1 {
			lines = append(lines, Line{Label: "or", Text: ApplyCommand(env, items[0].Revision), Code: true})
		}
	}
	return newMessage(kind, env, title, lines, keys, opts)
}

// PlainText renders a message as plain text (titles, "label: text" lines, code indented).
func (m Message) PlainText() string {
	var b strings.Builder
	b.WriteString(m.Title + "\n")
	for _, l := range m.Lines {
		if l.Label != "" {
			b.WriteString(l.Label + ":")
			if l.Code {
				b.WriteString("\n")
			} else {
				b.WriteString(" ")
			}
		}
		if l.Code {
			for _, c := range splitLines(l.Text) {
				b.WriteString("    " + c + "\n")
			}
			continue
		}
		b.WriteString(l.Text + "\n")
	}
	return b.String()
}
