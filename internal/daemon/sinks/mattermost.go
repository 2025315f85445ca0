package sinks

import (
	"context"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llm-gitops/platform/internal/daemon/message"
)

// MattermostConfig configures a Mattermost incoming-webhook sink. The webhook URL is a secret:
// it is read from URLFile or, when that is empty, from the environment variable URLEnv.
type MattermostConfig struct {
	URLFile  string `json:"urlFile,omitempty"`
	URLEnv   string `json:"urlEnv,omitempty"`
	Username string `json:"username,omitempty"`
	IconURL  string `json:"iconURL,omitempty"`
	// Timeout bounds one request ("15s"); default 15s. Ignored when Client is set.
	Timeout metav1.Duration `json:"timeout,omitempty"`
	// Client overrides the HTTP client (tests).
	Client *http.Client `json:"-"`
}

// Mattermost posts markdown messages to a Mattermost incoming webhook (Slack-compatible
// payload).
type Mattermost struct {
	httpSink
	url               string
	username, iconURL string
}

// NewMattermost reads the webhook URL and returns the sink.
func NewMattermost(cfg MattermostConfig) (*Mattermost, error) {
	h, u, err := webhook("mattermost", cfg.URLFile, cfg.URLEnv, cfg.Client, cfg.Timeout.Duration)
	if err != nil {
		return nil, err
	}
	return &Mattermost{httpSink: h, url: u, username: cfg.Username, iconURL: cfg.IconURL}, nil
}

// Send implements Sink.
func (s *Mattermost) Send(ctx context.Context, m message.Message) error {
	return s.postJSON(ctx, s.url, MattermostPayload(m, s.username, s.iconURL))
}

// mattermostMax is below Mattermost's 16383-character post limit.
const mattermostMax = 16000

// MattermostPayload renders m as a Mattermost webhook payload: markdown text, and username and
// icon_url when not empty.
func MattermostPayload(m message.Message, username, iconURL string) map[string]any {
	var b strings.Builder
	b.WriteString("#### " + mdEscape(m.Title) + "\n")
	for _, l := range m.Lines {
		label := ""
		if l.Label != "" {
			label = "**" + mdEscape(l.Label) + ":**"
		}
		switch {
		case l.Label == "Argo CD" && m.Link != "":
			b.WriteString(label + " [" + mdEscape(m.Env) + "](" + m.Link + ")\n")
		case l.Code:
			fence := "```"
			for strings.Contains(l.Text, fence) {
				fence += "`"
			}
			if label != "" {
				b.WriteString(label + "\n")
			}
			b.WriteString(fence + "\n" + l.Text + "\n" + fence + "\n")
		case label != "":
			b.WriteString(label + " " + mdEscape(l.Text) + "\n")
		default:
			b.WriteString(mdEscape(l.Text) + "\n")
		}
	}
	p := map[string]any{"text": message.Truncate(b.String(), mattermostMax)}
	if username != "" {
		p["username"] = username
	}
	if iconURL != "" {
		p["icon_url"] = iconURL
	}
	return p
}

// mdEscape backslash-escapes the characters markdown would interpret in plain text, and breaks
// mentions: a drifted value "@channel" or "@alice" must not ping anyone, so a zero-width space
// follows each "@".
func mdEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune("\\`*_~[]<>|#", r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return breakMentions(b.String())
}

// breakMentions puts a zero-width space after every "@", so chat shows "@channel" or "@alice"
// as typed but notifies nobody. Code blocks keep their text: no chat parses mentions there.
func breakMentions(s string) string { return strings.ReplaceAll(s, "@", "@\u200b") }
