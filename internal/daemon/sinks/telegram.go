package sinks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf16"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/llm-gitops/platform/internal/daemon/message"
)

// TelegramConfig configures a Telegram Bot API sink. The bot token is a secret: it is read from
// TokenFile or, when that is empty, from the environment variable TokenEnv.
type TelegramConfig struct {
	TokenFile string `json:"tokenFile,omitempty"`
	TokenEnv  string `json:"tokenEnv,omitempty"`
	// ChatID is the numeric chat id or "@channelname".
	ChatID string `json:"chatID"`
	// BaseURL is the Bot API endpoint; default https://api.telegram.org.
	BaseURL string `json:"baseURL,omitempty"`
	// Timeout bounds one request ("15s"); default 15s. Ignored when Client is set.
	Timeout metav1.Duration `json:"timeout,omitempty"`
	// Client overrides the HTTP client (tests).
	Client *http.Client `json:"-"`
}

// Telegram sends HTML messages with the Bot API's sendMessage.
type Telegram struct {
	httpSink
	endpoint string
	chatID   string
}

// NewTelegram reads the bot token and returns the sink.
func NewTelegram(cfg TelegramConfig) (*Telegram, error) {
	tok, err := ReadSecret("telegram bot token", cfg.TokenFile, cfg.TokenEnv)
	if err != nil {
		return nil, err
	}
	if cfg.ChatID == "" {
		return nil, errors.New("sinks: telegram: chat id is not configured")
	}
	base := cfg.BaseURL
	if base == "" {
		base = "https://api.telegram.org"
	}
	s := &Telegram{
		httpSink: newHTTPSink("telegram", cfg.Client, cfg.Timeout.Duration),
		endpoint: strings.TrimRight(base, "/") + "/bot" + tok + "/sendMessage",
		chatID:   cfg.ChatID,
	}
	s.secrets = []string{tok}
	return s, nil
}

// Send implements Sink. A message longer than Telegram's limit goes as several parts, in
// order; a retry after a failed part resends the parts already delivered (at-least-once).
func (s *Telegram) Send(ctx context.Context, m message.Message) error {
	for i, p := range TelegramPayloads(m, s.chatID) {
		body, err := json.Marshal(p)
		if err != nil {
			return fmt.Errorf("telegram: encode: %w", err)
		}
		data, err := s.post(ctx, s.endpoint, body)
		if err != nil {
			var he *HTTPError
			if errors.As(err, &he) && he.RetryAfter == 0 {
				he.RetryAfter = telegramRetryAfter(data)
			}
			return fmt.Errorf("part %d: %w", i+1, err)
		}
		var ans struct {
			OK          bool   `json:"ok"`
			Description string `json:"description"`
		}
		if json.Unmarshal(data, &ans) == nil && !ans.OK {
			return fmt.Errorf("telegram: part %d: not ok: %s", i+1, scrub(ans.Description, s.secrets))
		}
	}
	return nil
}

// telegramRetryAfter reads parameters.retry_after of a Bot API error answer.
func telegramRetryAfter(data []byte) time.Duration {
	var ans struct {
		Parameters struct {
			RetryAfter int `json:"retry_after"`
		} `json:"parameters"`
	}
	if json.Unmarshal(data, &ans) == nil && ans.Parameters.RetryAfter > 0 {
		return time.Duration(ans.Parameters.RetryAfter) * time.Second
	}
	return 0
}

// TelegramMaxLen is the Bot API's limit on a message's length.
const TelegramMaxLen = 4096

// TelegramPayloads renders m as sendMessage requests in HTML parse mode, split at line
// boundaries so that none exceeds TelegramMaxLen
// UTF-16 code units of HTML (more than the text Telegram counts after parsing tags) (a single longer line is itself split).
func TelegramPayloads(m message.Message, chatID string) []map[string]any {
	var blocks []string
	blocks = append(blocks, "<b>"+html.EscapeString(breakMentions(m.Title))+"</b>")
	for _, l := range m.Lines {
		label := ""
		if l.Label != "" {
			label = "<b>" + html.EscapeString(l.Label) + ":</b>"
		}
		switch {
		case l.Label == "Argo CD" && m.Link != "":
			blocks = append(blocks, label+` <a href="`+html.EscapeString(m.Link)+`">`+html.EscapeString(m.Env)+"</a>")
		case l.Code:
			if label != "" {
				blocks = append(blocks, label)
			}
			for _, part := range splitEscaped(l.Text, TelegramMaxLen-len("<pre></pre>")) {
				blocks = append(blocks, "<pre>"+part+"</pre>")
			}
		default:
			prefix := ""
			if label != "" {
				prefix = label + " "
			}
			parts := splitEscaped(breakMentions(l.Text), TelegramMaxLen-u16len(prefix))
			for i, part := range parts {
				if i == 0 {
					part = prefix + part
				}
				blocks = append(blocks, part)
			}
		}
	}
	var texts []string
	var cur strings.Builder
	curLen := 0
	for _, b := range blocks {
		n := u16len(b)
		if curLen > 0 && curLen+1+n > TelegramMaxLen {
			texts = append(texts, cur.String())
			cur.Reset()
			curLen = 0
		}
		if curLen > 0 {
			cur.WriteString("\n")
			curLen++
		}
		cur.WriteString(b)
		curLen += n
	}
	if curLen > 0 {
		texts = append(texts, cur.String())
	}
	var chat any = chatID
	if n, err := strconv.ParseInt(chatID, 10, 64); err == nil {
		chat = n
	}
	out := make([]map[string]any, len(texts))
	for i, t := range texts {
		out[i] = map[string]any{"chat_id": chat, "text": t, "parse_mode": "HTML", "disable_web_page_preview": true}
	}
	return out
}

// splitEscaped HTML-escapes s in pieces of at most max UTF-16 units each, never cutting an entity.
func splitEscaped(s string, max int) []string {
	var out []string
	var cur strings.Builder
	n := 0
	for _, r := range s {
		e := html.EscapeString(string(r))
		l := u16len(e)
		if n+l > max {
			out = append(out, cur.String())
			cur.Reset()
			n = 0
		}
		cur.WriteString(e)
		n += l
	}
	if n > 0 || len(out) == 0 {
		out = append(out, cur.String())
	}
	return out
}

// u16len is the length of s in UTF-16 code units, the unit of Telegram's limit.
func u16len(s string) int {
	n := 0
	for _, r := range s {
		n += utf16.RuneLen(r)
	}
	return n
}
