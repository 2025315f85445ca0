package sinks

import (
	"context"
	"net/http"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llm-gitops/platform/internal/daemon/message"
)

// SlackConfig configures a Slack incoming-webhook sink. The webhook URL is a secret: it is read
// from URLFile or, when that is empty, from the environment variable URLEnv.
type SlackConfig struct {
	URLFile string `json:"urlFile,omitempty"`
	URLEnv  string `json:"urlEnv,omitempty"`
	// Timeout bounds one request ("15s"); default 15s. Ignored when Client is set.
	Timeout metav1.Duration `json:"timeout,omitempty"`
	// Client overrides the HTTP client (tests).
	Client *http.Client `json:"-"`
}

// Slack posts Block Kit messages to a Slack incoming webhook.
type Slack struct {
	httpSink
	url string
}

// NewSlack reads the webhook URL and returns the sink.
func NewSlack(cfg SlackConfig) (*Slack, error) {
	h, u, err := webhook("slack", cfg.URLFile, cfg.URLEnv, cfg.Client, cfg.Timeout.Duration)
	if err != nil {
		return nil, err
	}
	return &Slack{httpSink: h, url: u}, nil
}

// Send implements Sink.
func (s *Slack) Send(ctx context.Context, m message.Message) error {
	return s.postJSON(ctx, s.url, SlackPayload(m))
}

// Slack Block Kit limits.
const (
	slackHeaderMax  = 150
	slackSectionMax = 3000
	slackBlocksMax  = 50
)

// SlackPayload renders m as a Slack webhook payload: a header block, section blocks (mrkdwn),
// a context block, and a plain text fallback.
func SlackPayload(m message.Message) map[string]any {
	blocks := []any{map[string]any{
		"type": "header",
		"text": map[string]any{"type": "plain_text", "text": message.Truncate(m.Title, slackHeaderMax), "emoji": true},
	}}
	section := func(text string) {
		if len(blocks) >= slackBlocksMax-2 {
			return
		}
		blocks = append(blocks, map[string]any{
			"type": "section",
			"text": map[string]any{"type": "mrkdwn", "text": message.Truncate(text, slackSectionMax)},
		})
	}
	var cur []string
	flush := func() {
		if len(cur) > 0 {
			section(strings.Join(cur, "\n"))
			cur = nil
		}
	}
	for _, l := range m.Lines {
		if l.Label == "Argo CD" {
			continue // in the context block
		}
		if l.Code {
			flush()
			text := "```" + message.Truncate(slackEscape(l.Text), slackSectionMax-60) + "```"
			if l.Label != "" {
				text = "*" + slackEscape(l.Label) + ":*\n" + text
			}
			section(text)
			continue
		}
		if l.Label != "" {
			cur = append(cur, "*"+slackEscape(l.Label)+":* "+slackEscape(l.Text))
		} else {
			cur = append(cur, slackEscape(l.Text))
		}
	}
	flush()
	ctx := "env *" + slackEscape(m.Env) + "* · " + string(m.Kind)
	if m.Link != "" {
		ctx += " · <" + slackEscape(m.Link) + "|Argo CD>"
	}
	blocks = append(blocks, map[string]any{
		"type":     "context",
		"elements": []any{map[string]any{"type": "mrkdwn", "text": ctx}},
	})
	return map[string]any{"text": slackEscape(message.Truncate(m.Title, 3000)), "blocks": blocks}
}

// slackEscape escapes the three characters Slack's mrkdwn reserves.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}
