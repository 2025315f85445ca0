package sinks

import (
	"strings"
	"testing"

	"github.com/llm-gitops/platform/internal/daemon/message"
)

func TestTelegramSplitsLongMessages(t *testing.T) {
	long := strings.Repeat("<&>é", 3000) // 12000 runes, escapes to far more
	m := message.Message{ID: "x", Kind: message.KindDrift, Env: "dev", Title: "t <b>", Lines: []message.Line{{Label: "diff", Text: long, Code: true}, {Text: long}}}
	ps := TelegramPayloads(m, "@chan")
	if len(ps) < 4 {
		t.Fatalf("parts = %d", len(ps))
	}
	for i, p := range ps {
		text := p["text"].(string)
		if n := u16len(text); n > TelegramMaxLen {
			t.Errorf("part %d: %d > %d", i, n, TelegramMaxLen)
		}
		if strings.Count(text, "<pre>") != strings.Count(text, "</pre>") {
			t.Errorf("part %d: unbalanced <pre>", i)
		}
		if strings.Contains(strings.NewReplacer("<pre>", "", "</pre>", "", "<b>", "", "</b>", "").Replace(text), "<") {
			t.Errorf("part %d: unescaped <", i)
		}
		if p["chat_id"] != "@chan" || p["parse_mode"] != "HTML" || p["disable_web_page_preview"] != true {
			t.Errorf("part %d: %v", i, p)
		}
	}
}
