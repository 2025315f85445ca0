package report

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"

	"github.com/llm-gitops/platform/internal/drift"
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
