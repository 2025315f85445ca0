// Package message is the sink-independent chat message: what notify writes, the outbox stores
// and each sink renders in its own markup. It holds the type and its plain-text form only;
// which messages drift makes is notify's business.
package message

import (
	"crypto/sha256"
	"encoding/hex"
	"sort"
	"strings"
	"unicode/utf8"
)

// Kind is what a Message announces.
type Kind string

// Message kinds.
const (
	KindDrift    Kind = "drift"    // one new drift
	KindResolved Kind = "resolved" // drift that went away
	KindDigest   Kind = "digest"   // many new drifts folded together
	// KindNotAudited says an Application could not be audited (its chart repository or cluster
	// unreachable, its source not rendering): not drift, since nothing of its objects is known.
	KindNotAudited Kind = "not-audited"
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
	// Keys are the dedupe keys (see notify.ItemKey) of the drift items the message announces.
	Keys []string `json:"keys"`
	// Link points at the Argo CD application, when notify.Options.ArgoCDURL is set.
	Link string `json:"link,omitempty"`
}

// New returns a message with its keys sorted and its ID computed from kind and keys; a link,
// when not empty, is also its last line ("Argo CD").
func New(kind Kind, env, title string, lines []Line, keys []string, link string) Message {
	keys = append([]string(nil), keys...)
	sort.Strings(keys)
	h := sha256.New()
	h.Write([]byte(kind))
	for _, k := range keys {
		h.Write([]byte{0})
		h.Write([]byte(k))
	}
	m := Message{ID: hex.EncodeToString(h.Sum(nil)[:12]), Kind: kind, Env: env, Title: title, Lines: lines, Keys: keys, Link: link}
	if m.Link != "" {
		m.Lines = append(m.Lines, Line{Label: "Argo CD", Text: m.Link})
	}
	return m
}

// Identity is a dedupe key without its last part, the desired revision: the same drift seen
// against another revision has the same identity.
func Identity(key string) string {
	i := strings.LastIndex(key, "|")
	if i < 0 {
		return key
	}
	return key[:i]
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
			for c := range strings.Lines(l.Text) {
				b.WriteString("    " + strings.TrimSuffix(c, "\n") + "\n")
			}
			continue
		}
		b.WriteString(l.Text + "\n")
	}
	return b.String()
}

// Truncate cuts s to at most n runes, marking the cut with "…".
func Truncate(s string, n int) string {
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
